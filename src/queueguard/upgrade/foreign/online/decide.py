"""Which statements of the bill go online, and in which forms (pure): a statement whose
read- or write-blocking lock on a table that already holds rows would be held longer than
the budget at the target's size, by `plan`'s own estimate of that statement (on this path
the revision commits before it, so no later statement's time is added to its hold)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from queueguard.sets import Revision
from queueguard.sets.split import is_transaction_control
from queueguard.upgrade.foreign.online.choose import Form, NoForm, choose
from queueguard.upgrade.plan.bill import Line, Size


@dataclass
class Decision:
    """One statement over the budget: its line of the bill, where it is in its revision, and
    its online forms — or why it has none."""

    revision: str
    index: int  # in the revision's statements
    line: Line
    forms: list[Form] | None
    refusal: str | None = None


def positions(statements: Sequence[str], start: int) -> list[int]:
    """The statement indexes the bill's lines stand for: from `start`, transaction control
    left out (as `plan` leaves it out)."""
    return [i for i in range(start, len(statements)) if not is_transaction_control(statements[i])]


def _has_rows(relation: str, sizes: Mapping[str, Size], indexes: Mapping[str, str]) -> bool:
    size = sizes.get(indexes.get(relation, relation))
    return size is not None and (bool(size.rows) or size.heap_bytes > 8192)


def over_budget(line: Line, budget_ms: float, sizes: Mapping[str, Size]) -> bool:
    if line.estimate_ms <= budget_ms:
        return False
    return any(_has_rows(rel, sizes, {}) for rel, _ in line.blocking)


def decide(
    revisions: Sequence[tuple[Revision, list[Line]]],
    budget_ms: float,
    sizes: Mapping[str, Size],
    start: Mapping[str, int],
    unrendered: Mapping[str, str] | None = None,
) -> list[Decision]:
    """The decisions for every statement over the budget, in order. `unrendered`: {Alembic
    revision: why it cannot run as its rendered SQL} (`alembic_sql`; a revision that can is
    given here with its statements)."""
    found: list[Decision] = []
    for rev, lines in revisions:
        statements = rev.statements
        if statements is None:  # a Python revision: its statements are known only as it runs
            why = (unrendered or {}).get(rev.id)
            for line in lines:
                if over_budget(line, budget_ms, sizes):
                    refusal = f"{_PYTHON_REVISION}: {why}" if why else _PYTHON_REVISION
                    found.append(Decision(rev.id, line.index, line, None, refusal))
            continue
        where = positions(statements, start.get(rev.id, 0))
        for line in lines:
            if not over_budget(line, budget_ms, sizes):
                continue
            index = where[line.index]
            table_rewritten = any(
                rel == table for rel, _ in line.blocking for table in line.seen.rewrites
            )
            chosen = choose(statements[index], rewrites=table_rewritten, created=line.seen.created)
            if isinstance(chosen, NoForm):
                found.append(Decision(rev.id, index, line, None, chosen.reason))
            else:
                found.append(Decision(rev.id, index, line, chosen))
    return found


_PYTHON_REVISION = (
    "an Alembic revision's statements run through its env.py: only plain DDL that "
    "`alembic upgrade --sql` renders as the driver sees it could be given an online form, "
    "and queueguard does not rewrite a Python revision"
)
