"""Which statements of the bill go online, and in which forms (pure): a statement whose
read- or write-blocking lock on a table that already holds rows would be held longer than
the budget at the target's size, by `plan`'s own estimate of that statement (on this path
the revision commits before it, so no later statement's time is added to its hold).

A statement that runs plain holds its lock to its transaction's commit, through every later
statement of that transaction: on this path up to the next statement that goes online (the
runner commits before it) or runs outside a transaction, or the revision's end; through
env.py, the whole revision. One whose lock would be held longer than the budget only
because of the statements after it (a cheap `ALTER TABLE` before a long backfill in the same
file) runs alone: in a transaction of its own (the `plain` form), committed before the
statements after it, so it is never held hostage by them. Through env.py an Alembic
revision cannot be cut so: it is refused unless it runs as its rendered SQL."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from queueguard.engine.online.choose import PLAIN, Form, NoForm, choose
from queueguard.engine.plan.bill import Line, Size
from queueguard.sets import Revision
from queueguard.sets.split import is_transaction_control


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


def _on_rows(line: Line, sizes: Mapping[str, Size]) -> list[tuple[str, str]]:
    """The line's read- or write-blocking locks on tables that hold rows."""

    def filled(size: Size | None) -> bool:
        return size is not None and (bool(size.rows) or size.heap_bytes > 8192)

    return [(rel, mode) for rel, mode in line.blocking if filled(sizes.get(rel))]


def over_budget(line: Line, budget_ms: float, sizes: Mapping[str, Size]) -> bool:
    return line.estimate_ms > budget_ms and bool(_on_rows(line, sizes))


def holds_over(line: Line, budget_ms: float, sizes: Mapping[str, Size]) -> bool:
    """A blocking lock on a table holding rows held, as the bill computed it (to the
    transaction's commit: for an Alembic revision through env.py, the revision's end), longer
    than the budget."""
    return line.held_ms > budget_ms and bool(_on_rows(line, sizes))


def _holds(lines: Sequence[Line], online: Collection[int]) -> list[tuple[float, int]]:
    """(how long each line's locks stay held on this path, the last line they are held
    through): its own estimate plus every later line's of its transaction, which ends before
    a line in `online` and at a line outside a transaction (or the revision's end)."""
    found: list[tuple[float, int]] = [(0.0, 0)] * len(lines)
    run, last = 0.0, len(lines) - 1
    for i in range(len(lines) - 1, -1, -1):
        line = lines[i]
        if not line.seen.transactional or i in online:
            found[i] = (line.estimate_ms, i)
            run, last = 0.0, i - 1
            continue
        run += line.estimate_ms
        found[i] = (run, last)
    return found


def _held_past(
    lines: Sequence[Line],
    online: Collection[int],
    budget_ms: float,
    sizes: Mapping[str, Size],
) -> list[tuple[int, float, int]]:
    """(line, hold, the last line it is held through) for each line not over the budget by
    itself whose blocking lock on a table with rows stays held longer than the budget through
    the lines after it."""
    found: list[tuple[int, float, int]] = []
    for i, (hold, last) in enumerate(_holds(lines, online)):
        line = lines[i]
        if i in online or last <= i or hold <= budget_ms or over_budget(line, budget_ms, sizes):
            continue
        if _on_rows(line, sizes):
            found.append((i, hold, last))
    return found


def _alone(line: Line, sql: str, sizes: Mapping[str, Size]) -> list[Form]:
    """The statement as written, in a transaction of its own."""
    return [Form(PLAIN, _on_rows(line, sizes)[0][0], sql)]


def decide(
    revisions: Sequence[tuple[Revision, list[Line]]],
    budget_ms: float,
    sizes: Mapping[str, Size],
    start: Mapping[str, int],
    unrendered: Mapping[str, str] | None = None,
    fmt: str = "alembic",
) -> list[Decision]:
    """The decisions for every statement over the budget, in order. `unrendered`: {Alembic
    revision or Django migration: why it cannot run as SQL} (`alembic_sql`, `django_sql`;
    one that can is given here with its statements)."""
    found: list[Decision] = []
    for rev, lines in revisions:
        statements = rev.statements
        if statements is None:  # a Python revision: its statements are known only as it runs
            why = (unrendered or {}).get(rev.id)
            python = _DJANGO_MIGRATION if fmt == "django" else _PYTHON_REVISION
            refusal = f"{python}: {why}" if why else python
            # through its tool the revision is one transaction: the bill's held_ms is the hold
            for line in lines:
                if over_budget(line, budget_ms, sizes):
                    found.append(Decision(rev.id, line.index, line, None, refusal))
                elif holds_over(line, budget_ms, sizes):
                    rel, mode = _on_rows(line, sizes)[0]
                    hostage = (
                        f"its {mode} on {rel} is held ~{line.held_ms:.0f} ms, to the "
                        f"revision's commit (its tool runs it in one transaction); {refusal}"
                    )
                    found.append(Decision(rev.id, line.index, line, None, hostage))
            continue
        where = positions(statements, start.get(rev.id, 0))
        mine: dict[int, Decision] = {}
        for at, line in enumerate(lines):
            if not over_budget(line, budget_ms, sizes):
                continue
            index = where[line.index]
            table_rewritten = any(
                rel == table for rel, _ in line.blocking for table in line.seen.rewrites
            )
            chosen = choose(statements[index], rewrites=table_rewritten, created=line.seen.created)
            if isinstance(chosen, NoForm):
                mine[at] = Decision(rev.id, index, line, None, chosen.reason)
            else:
                mine[at] = Decision(rev.id, index, line, chosen)
        online = {at for at, d in mine.items() if d.forms}
        # the last statement held hostage runs alone: the runner commits before it, which
        # ends the transaction of those before it too; their holds are priced again
        while held := _held_past(lines, online, budget_ms, sizes):
            at = held[-1][0]
            index = where[lines[at].index]
            mine[at] = Decision(
                rev.id, index, lines[at], _alone(lines[at], statements[index], sizes)
            )
            online.add(at)
        found.extend(mine[at] for at in sorted(mine))
    return found


_PYTHON_REVISION = (
    "an Alembic revision's statements run through its env.py: only plain DDL that "
    "`alembic upgrade --sql` renders as the driver sees it could be given an online form, "
    "and queueguard does not rewrite a Python revision"
)
_DJANGO_MIGRATION = (
    "a Django migration runs through Django's migrate: it is given online forms only as the "
    "SQL migrate sent for it on the sample, where that SQL is all it did"
)
