"""The online forms for a Django migration. Its statements are Django's to choose, known only
by running its migrate; queueguard gives it forms only where what migrate sent on the sample
is all the migration did (`plan.django_revision.as_sql`): no Python step, nothing opaque, and
the project on Django's own PostgreSQL (or PostGIS) schema editor and `migrate` command — a
backend of the project's own may send something else on the target, and a command of its own
would be skipped. Such a migration then runs as that SQL,
through the runner of the SQL formats (forms, progress rows, resumable), recorded through
Django's fake path in its last transaction (`django_online`); the proof compares it with
the migration run through Django's migrate.

Django's own names stay: the statements are migrate's, with the index and constraint names
its schema editor chose (`<table>_<column>_<hash>`), and the forms keep the names of the
statements they replace."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import replace

from queueguard.engine.plan.bill import Line
from queueguard.engine.plan.planner import Plan
from queueguard.sets import MigrationSet
from queueguard.sets import django as django_format
from queueguard.sets.model import CAPTURED
from queueguard.sets.split import split


def resumed(mset: MigrationSet, kept: Mapping[str, Sequence[str]]) -> MigrationSet:
    """The set with the migrations a killed run left part applied as the SQL they were begun
    with (kept with their progress rows)."""
    return _with(mset, {rid: tuple(sql) for rid, sql in kept.items() if rid in mset.ids})


def _with(mset: MigrationSet, converted: Mapping[str, tuple[str, ...]]) -> MigrationSet:
    if not converted:
        return mset
    revisions = tuple(
        replace(r, statements=converted[r.id], native={**r.native, CAPTURED: True})
        if r.id in converted
        else r
        for r in mset.revisions
    )
    return replace(mset, revisions=revisions)


def convert(
    mset: MigrationSet, bill: Plan, wanted: Collection[str], tables: Collection[str]
) -> tuple[MigrationSet, dict[str, str]]:
    """The set with each migration of `wanted` run as the SQL migrate sent for it where that
    is all it did; and why not, for the others."""
    refused: dict[str, str] = {}
    converted: dict[str, tuple[str, ...]] = {}
    backend = _backend_refusal(mset) if wanted else None
    lines = dict(bill.revisions)
    for revision_id in wanted:
        found = bill.captured.get(revision_id, "it was not captured on the sample")
        carried = carried_across(lines.get(revision_id, []), tables)
        if backend is not None:
            refused[revision_id] = backend
        elif isinstance(found, str):
            refused[revision_id] = found
        elif carried is not None:
            refused[revision_id] = carried
        else:  # "SET CONSTRAINTS …; ALTER TABLE …" is one execute of Django's: two statements
            converted[revision_id] = tuple(one for sql in found for one in split(sql))
    return _with(mset, converted), refused


def carried_across(lines: Sequence[Line], tables: Collection[str]) -> str | None:
    """Why a migration cannot go online when one of its operations rewrites several tables:
    an `AlterField` of a primary key, whose type Django carries to every column that
    references it (dropping and adding the foreign keys around them). The rebuild serves
    one table; between two tables' swaps the keys would be gone. `tables`: the database's
    tables (a sequence `ALTER SEQUENCE … AS integer` rewrites is not one). Pure."""
    rewritten: dict[str, list[str]] = {}
    for line in lines:
        origin = line.seen.origin or ""
        if origin[:1].isdigit():
            for table in line.seen.rewrites:
                if table in tables and table not in rewritten.setdefault(origin, []):
                    rewritten[origin].append(table)
    for origin, names in rewritten.items():
        if len(names) > 1:
            return (
                f"operation {origin} rewrites {len(names)} tables ({', '.join(names)}): "
                "Django carries a primary key's type to every column that references it, "
                "and the rebuild serves one table (the foreign keys would be gone between "
                "the tables' swaps)"
            )
    return None


def _backend_refusal(mset: MigrationSet) -> str | None:
    runner = django_format.graph_of(mset).runner  # its facts, from the project's setup
    if runner.custom_migrate:
        return (
            f"the project has its own migrate command ({runner.custom_migrate}): a migration "
            "run as SQL would skip it"
        )
    if runner.stock_backend:
        return None
    return (
        f"the project's database backend is {runner.facts.get('engine')} (schema editor "
        f"{runner.facts.get('editor')}): what it sends on the target may differ from the "
        "sample's SQL"
    )
