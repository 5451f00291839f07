"""`queueguard mutate`: mutation testing of migrations — how strong are the upgrade gates?

A revision's SQL step files are mutated one small change at a time (`operators`: drop a WHERE
conjunct, flip a comparison, ±1, swap ASC/DESC, drop a statement, …; pure code over sqlglot,
no database). Each mutant is written into a scratch copy of the migration set and judged by
the gates a migration author relies on: `queueguard lint`, `queueguard verify` and an optional
user command (`runner`). A mutant no gate fails *survives*: the gates cannot tell the mutated
migration from the real one. Mutants that cannot change behaviour are listed, with a reason,
in a reviewed file (`equivalents`). See docs/mutation.md.

Modules: `model` (the Mutant), `sites` (statements as mutation sites), `operators/`,
`generate` (a revision's mutants), `equivalents`, `workspace` (scratch copies), `shared`
(databases shared by one run), `gates`, `worker` (one mutant in a worker process), `runner`
(jobs, timeouts, baselines), `report` (score, survivors, JSON).
"""

from __future__ import annotations

from queueguard.mutate.generate import generate
from queueguard.mutate.model import Mutant
from queueguard.mutate.operators import OPERATORS

__all__ = ["OPERATORS", "Mutant", "generate"]
