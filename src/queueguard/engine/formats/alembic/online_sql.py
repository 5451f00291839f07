"""The online forms for an Alembic revision. Its statements are Python's to choose, known only
by running it; queueguard gives it forms only where that Python made no choice: where
`alembic upgrade DOWN:REV --sql` renders, offline, exactly the statements the driver saw the
revision send on plan's scratch copy — as many, in the same order, each one the same
statement to PostgreSQL's parser. Such a revision then runs as that SQL, through the runner of
the SQL formats (forms, progress rows, resumable), with Alembic's own bookkeeping as it
rendered it in the revision's last transaction; the proof compares it with the revision run
through env.py.

Any other revision over the budget — a data migration that reads rows (it cannot be rendered
offline), statements sent with bound parameters (`op.bulk_insert`: the rendering inlines the
values), a revision whose offline branch of env.py renders something else — refuses with
the statement that differs (`--force` runs it plain, through env.py)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

import pglast

from queueguard.engine.online.choose import render
from queueguard.sets import MigrationSet, Revision
from queueguard.sets.alembic_render import BOOKKEEPING, NotRendered, Rendered, rendered


def _parsed(sql: str) -> str | None:
    try:
        return "; ".join(render(s.stmt) for s in pglast.parse_sql(sql) if s.stmt is not None)
    except pglast.parser.ParseError:
        return None


def same(rendered_sql: str, sent: str) -> bool:
    """The same statement: the same text, or the same parse tree (whitespace, comments and
    the spelling of keywords aside; every literal and name as written)."""
    if rendered_sql.strip().rstrip(";").strip() == sent.strip().rstrip(";").strip():
        return True
    mine = _parsed(rendered_sql)
    return mine is not None and mine == _parsed(sent)


def _short(sql: str) -> str:
    return " ".join(sql.split())[:160]


def difference(found: Rendered, sent: Sequence[str]) -> str | None:
    """Why the rendering is not what the driver saw (None: it is)."""
    for i, (mine, theirs) in enumerate(zip(found.statements, sent, strict=False)):
        if not same(mine, theirs):
            return (
                f"statement {i + 1} as `alembic upgrade --sql` renders it is not what the "
                f"driver sent: rendered `{_short(mine)}`, sent `{_short(theirs)}`"
            )
    if len(found.statements) != len(sent):
        return (
            f"`alembic upgrade --sql` renders {len(found.statements)} statement(s) where the "
            f"driver sent {len(sent)}"
        )
    return None


def as_sql(revision: Revision, found: Rendered) -> Revision:
    """The revision as its rendered SQL, Alembic's bookkeeping beside it."""
    return replace(
        revision,
        statements=found.statements,
        native={**revision.native, BOOKKEEPING: found.bookkeeping},
    )


def convert(
    mset: MigrationSet, sent: Mapping[str, Sequence[str]]
) -> tuple[MigrationSet, dict[str, str]]:
    """The set with each revision of `sent` ({revision: the statements the driver saw it
    send}) run as its rendered SQL where that is the same; and why not, for the others."""
    converted: dict[str, Rendered] = {}
    refused: dict[str, str] = {}
    for revision_id, statements in sent.items():
        found = rendered(mset, mset.get(revision_id))
        if isinstance(found, NotRendered):
            refused[revision_id] = found.reason
            continue
        why = difference(found, statements)
        if why is None:
            converted[revision_id] = found
        else:
            refused[revision_id] = why
    return with_rendered(mset, converted), refused


def with_rendered(mset: MigrationSet, found: Mapping[str, Rendered]) -> MigrationSet:
    if not found:
        return mset
    revisions = tuple(as_sql(r, found[r.id]) if r.id in found else r for r in mset.revisions)
    return replace(mset, revisions=revisions)


def resumed(mset: MigrationSet, revision_ids: Sequence[str]) -> MigrationSet:
    """The set with the revisions a previous run left part applied (their progress rows) as
    their rendered SQL again: the rows' checksums pin those statements, so a revision whose
    rendering changed meanwhile is refused by the runner, as a changed SQL file is."""
    found: dict[str, Rendered] = {}
    for revision_id in revision_ids:
        if revision_id not in mset.ids:
            continue
        got = rendered(mset, mset.get(revision_id))
        if isinstance(got, Rendered):
            found[revision_id] = got
    return with_rendered(mset, found)
