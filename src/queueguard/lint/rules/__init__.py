"""queueguard's own lint rules: one module per rule, run in the order of `RULES`.

Each module exposes `RULE`, a `Rule` whose `check` reads the whole `Corpus` (so a rule can
span a revision's step files, or the manifest of a migration directory) and yields
`Finding`s. squawk's general PostgreSQL rules run before these (`queueguard.lint.squawk`).
"""

from __future__ import annotations

from queueguard.lint.model import Rule
from queueguard.lint.rules import (
    audit_read_only,
    hot_path_trigger,
    lock_budget,
    lock_order,
    released_hash,
    set_based,
)

#: The ordered list of own rules.
RULES: tuple[Rule, ...] = (
    released_hash.RULE,
    audit_read_only.RULE,
    lock_order.RULE,
    lock_budget.RULE,
    set_based.RULE,
    hot_path_trigger.RULE,
)
