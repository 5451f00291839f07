"""Lock budgets: the exact lock each revision takes on each table that existed before it ran.

A revision declares its budget as a fact of its own (`locks = {"tasks": "ACCESS EXCLUSIVE",
…}` in `versions/<rev>.py`, beside the frozen SQL, so a budget never changes a released
hash). The budget is exact, not a ceiling: a stronger lock blocks more than the author said,
and a missing one means the documented lock order no longer protects writers from deadlocks.
Indexes count as their table; relations the revision creates itself and queueguard's own
bookkeeping (`queueguard_version`, `queueguard_migrations`) are outside the budget.

`upgrade` enforces it (`held` just before commit, `violations`, the revision rolls back);
`queueguard lint` checks the step files statically (`lint.rules.lock_budget`); preflight and
the docs read their lock tables from it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from queueguard.pg.sqlfiles import queries
from queueguard.revisions import LOCK_MODES, SetFacts

Q = queries("queueguard.engine", "locks.sql")
MODES = LOCK_MODES
#: queueguard's own bookkeeping: never part of a budget.
BOOKKEEPING = frozenset({"queueguard_version", "queueguard_migrations"})
_PG_NAMES = {"".join(w.title() for w in m.split()) + "Lock": m for m in MODES}


#: PostgreSQL's table-level lock conflicts (the documentation's table 13.2), by mode
CONFLICTS: dict[str, frozenset[str]] = {
    "ACCESS SHARE": frozenset({"ACCESS EXCLUSIVE"}),
    "ROW SHARE": frozenset({"EXCLUSIVE", "ACCESS EXCLUSIVE"}),
    "ROW EXCLUSIVE": frozenset({"SHARE", "SHARE ROW EXCLUSIVE", "EXCLUSIVE", "ACCESS EXCLUSIVE"}),
    "SHARE UPDATE EXCLUSIVE": frozenset(
        {"SHARE UPDATE EXCLUSIVE", "SHARE", "SHARE ROW EXCLUSIVE", "EXCLUSIVE", "ACCESS EXCLUSIVE"}
    ),
    "SHARE": frozenset(
        {"ROW EXCLUSIVE", "SHARE UPDATE EXCLUSIVE", "SHARE ROW EXCLUSIVE", "EXCLUSIVE"}
        | {"ACCESS EXCLUSIVE"}
    ),
    "SHARE ROW EXCLUSIVE": frozenset(MODES[2:]),
    "EXCLUSIVE": frozenset(MODES[1:]),
    "ACCESS EXCLUSIVE": frozenset(MODES),
}


def weakest_conflicting(mode: str) -> str:
    """The weakest mode another session can hold to make `mode` wait (pure)."""
    return next(m for m in MODES if mode in CONFLICTS[m])


def guard_above(ceiling: str | None) -> str | None:
    """The weakest mode that makes every mode stronger than `ceiling` wait and lets every
    mode up to it through (None: nothing is stronger; `ceiling` None: no lock is allowed, so
    every mode must wait). Held by an observer, it turns any lock above a ceiling into a wait
    that can be seen in pg_locks (pure)."""
    allowed = set() if ceiling is None else set(MODES[: MODES.index(ceiling) + 1])
    above = set(MODES) - allowed
    if not above:
        return None
    for mode in MODES:
        if above <= CONFLICTS[mode] and not allowed & CONFLICTS[mode]:
            return mode
    raise ValueError(f"no lock mode separates {ceiling} from the modes above it")


def mode_of(pg_lock_mode: str) -> str:
    """`AccessExclusiveLock` (pg_locks) -> `ACCESS EXCLUSIVE`."""
    return _PG_NAMES[pg_lock_mode]


def strongest(modes: list[str]) -> str:
    return max(modes, key=MODES.index)


@dataclass(frozen=True)
class Violation:
    table: str
    held: str | None  # None: the budget's lock was not taken
    budget: str | None  # None: the table is not in the budget
    kind: str = "budget"  # or "ceiling" (the online path's)

    def __str__(self) -> str:
        if self.held is None:
            return f"does not take {self.budget} on {self.table} ({self.kind} {self.budget})"
        if self.budget is None:
            return f"takes {self.held} on {self.table}, which is not in its {self.kind}"
        return f"takes {self.held} on {self.table} ({self.kind} {self.budget})"


def combined(budgets: Iterable[Mapping[str, str] | None]) -> dict[str, str]:
    """The locks several revisions take in a row: the strongest mode per table."""
    merged: dict[str, str] = {}
    for budget in budgets:
        for table, mode in (budget or {}).items():
            merged[table] = strongest([mode, merged.get(table, mode)])
    return merged


def render(budget: Mapping[str, str]) -> str:
    """`ACCESS EXCLUSIVE on tasks, ACCESS SHARE on executions` (strongest first)."""
    return ", ".join(f"{mode} on {table}" for table, mode in _ordered(budget))


def violations(budget: Mapping[str, str], held: Mapping[str, str]) -> list[Violation]:
    """Every table whose strongest held lock differs from its budget (pure)."""
    found = []
    for table in sorted(set(budget) | set(held)):
        if held.get(table) != budget.get(table):
            found.append(Violation(table, held.get(table), budget.get(table)))
    return found


def relations(cursor: Any) -> dict[int, str]:
    """{oid: table} of the current schema's tables and indexes (an index maps to its table)."""
    cursor.execute(Q["relations"])
    return {int(oid): str(table) for oid, table in cursor.fetchall()}


def held(cursor: Any, before: Mapping[int, str]) -> dict[str, str]:
    """{table: strongest mode} this transaction holds on tables that existed `before`."""
    cursor.execute(Q["held"])
    modes: dict[str, list[str]] = {}
    for oid, pg_mode in cursor.fetchall():
        table = before.get(int(oid))
        if table is not None and table not in BOOKKEEPING:
            modes.setdefault(table, []).append(mode_of(str(pg_mode)))
    return {table: strongest(found) for table, found in modes.items()}


def held_tables(cursor: Any, outside: frozenset[str] = BOOKKEEPING) -> dict[str, str]:
    """{table: strongest mode} this transaction holds, tables `outside` aside (one query)."""
    cursor.execute(Q["held_tables"])
    modes: dict[str, list[str]] = {}
    for table, pg_mode in cursor.fetchall():
        if table not in outside:
            modes.setdefault(str(table), []).append(mode_of(str(pg_mode)))
    return {table: strongest(found) for table, found in modes.items()}


def above_ceiling(ceiling: Mapping[str, str], held: Mapping[str, str]) -> list[Violation]:
    """Every table held in a mode stronger than its ceiling, or not in the ceiling (pure).
    A ceiling, not an exact budget: the online path's transactions each take a part of it."""
    return [
        Violation(table, mode, ceiling.get(table), "ceiling")
        for table, mode in sorted(held.items())
        if table not in ceiling or MODES.index(mode) > MODES.index(ceiling[table])
    ]


def markdown(migrations: SetFacts) -> str:
    """The lock budgets of a migration set as the docs' table (docs/migrations.md)."""
    lines = ["| revision | locks on tables that existed before it (its budget) |", "|---|---|"]
    for revision in migrations.revisions:
        budget = revision.locks or {}
        shown = ", ".join(f"{mode} on `{table}`" for table, mode in _ordered(budget))
        lines.append(f"| {revision.id} | {shown or 'none'} |")
    return "\n".join(lines)


def _ordered(budget: Mapping[str, str]) -> list[tuple[str, str]]:
    return sorted(budget.items(), key=lambda item: (-MODES.index(item[1]), item[0]))
