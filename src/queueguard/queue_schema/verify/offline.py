"""verify's checks of a fixture upgraded offline, one at a time: the golden state and rows,
the fresh and the frozen head catalogs, the head's invariants, a re-run that changes nothing,
the upgrade step by step, the protocol fence, contention and (on v0.3) the negative cases
refused."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from queueguard import snapshot
from queueguard.engine import catalog
from queueguard.engine.verify.fresh import against_fresh
from queueguard.pg.connect import connection
from queueguard.pg.scratch import ScratchDatabases
from queueguard.queue_schema import audit, contention, golden, legacy, refusals, rows
from queueguard.queue_schema.golden import Fixture
from queueguard.queue_schema.manifest import online_files
from queueguard.queue_schema.runner import upgrade
from queueguard.queue_schema.verify.reads import _checksums, _clock, _export, _whole
from queueguard.queue_schema.verify.report import Check, json_diff, state_diff
from queueguard.revisions import SetFacts


def _offline_checks(
    fixture: Fixture,
    scratch: ScratchDatabases,
    template_name: str,
    db: str,
    exported: tuple[dict[str, Any], rows.Doc],
    fresh_catalog: Any,
    frozen_catalog: dict[str, Any] | None,
    migrations: SetFacts,
) -> Iterator[Check]:
    """golden, rows, catalog, frozen, invariants, idempotent, stepwise, fence, one at a time
    (a caller may stop at the first that fails): `db` is the fixture upgraded offline,
    `exported` its state document and its whole rows."""
    actual, whole = exported
    same = snapshot.normalise(actual) == snapshot.normalise(fixture.expected_head)
    yield Check("golden", same, "" if same else state_diff(fixture.expected_head, actual))
    yield _rows_check(fixture.expected_rows, whole)

    upgraded_catalog = catalog.introspect(db)
    # the notes (column order) are no difference: the check has always passed over them
    differences, _ = against_fresh(upgraded_catalog, fresh_catalog)
    yield Check("catalog", not differences, "\n".join(differences[:30]))
    yield _frozen(frozen_catalog, upgraded_catalog)
    yield _invariants(db, migrations)

    before = _checksums(db)
    again = upgrade(db, progress=False, migrations=migrations)
    after = _checksums(db)
    changed = [t for t in before if before[t] != after.get(t)]
    yield Check(
        "idempotent",
        not again.applied and not changed,
        f"changed tables: {changed}" if changed else "no-op",
    )

    stepwise = scratch.create(template_name)
    since = _clock(stepwise)
    for revision in migrations.pending(fixture.revision, migrations.head.id):
        upgrade(stepwise, to=revision.id, progress=False, migrations=migrations)
    same_steps = snapshot.normalise(_export(stepwise)) == snapshot.normalise(actual)
    step_rows = rows.differences(whole, _whole(stepwise, since, migrations))
    yield Check(
        "stepwise",
        same_steps and not step_rows,
        "\n".join(step_rows) if same_steps else state_diff(actual, _export(stepwise)),
    )
    yield _fence(fixture, scratch.create(template_name), migrations)
    yield _contention(fixture, scratch.create(template_name), migrations)
    if fixture.name == golden.NEGATIVE_BASE:
        yield _refusals(fixture, scratch, template_name, migrations)


def _contention(fixture: Fixture, db: str, migrations: SetFacts) -> Check:
    """While another session holds a lock the next revision needs, upgrade gives up with
    LockTimeout within its ladder and changes nothing (`upgrade.contention`)."""
    outcome = contention.probe(db, migrations, fixture.revision)
    if outcome is None:
        return Check("contention", True, f"no revision after {fixture.revision} takes a lock")
    problems = outcome.problems()
    return Check("contention", not problems, "\n".join(problems) or outcome.summary())


def _refusals(
    fixture: Fixture, scratch: ScratchDatabases, template: str, migrations: SetFacts
) -> Check:
    """Each negative case (the fixture broken one defect at a time) is refused by `upgrade`
    and by the online path's expand, with a typed error naming the finding, and the database
    is left as it was (`upgrade.refusals`)."""
    cases = golden.negative_cases(fixture.folder.parent)
    if not cases:
        return Check("refusals", True, "no negative cases")
    previous = migrations.previous(migrations.head.id)
    online_path = bool(online_files(migrations.head.id, Path(migrations.root))) and (
        previous == fixture.revision
    )
    found: list[str] = []
    for case in cases:
        db = scratch.create(template)
        found += refusals.run_case(db, case, migrations, online_path)
    paths = "upgrade and upgrade --online" if online_path else "upgrade"
    detail = "\n".join(found) or f"{len(cases)} broken databases refused by {paths}, unchanged"
    return Check("refusals", not found, detail)


def _rows_check(expected: rows.Doc | None, actual: rows.Doc) -> Check:
    """Every column of every row equals the golden run's (`upgrade.rows`): timestamps the
    fixture fixed stay fixed, none becomes the upgrade's "now"."""
    if expected is None:
        hint = f"no {golden.EXPECTED_ROWS}: python -m queueguard.queue_schema.fixturegen --write"
        return Check("rows", False, hint)
    found = rows.differences(expected, actual)
    total = sum(len(r) for r in actual.values())
    return Check("rows", not found, "\n".join(found) or f"{total} rows, every column")


def _invariants(db: str, migrations: SetFacts) -> Check:
    """The upgraded database passes the checks that apply to the head revision (the state the
    head guarantees: e.g. keys equal to their components, every task with its directive,
    counters at or above the highest ids): a migration that breaks one fails here even where
    the golden state cannot show it."""
    head = migrations.head
    queries = audit.for_revision(head.id)
    blocking = []
    with connection(db) as conn, conn.cursor() as cursor:
        audit.set_local(cursor, target=head.id, protocol=head.protocol)
        for query in queries:
            blocking += [str(f) for f in audit.run(cursor, query) if f.blocking]
        conn.rollback()
    detail = "\n".join(blocking) if blocking else f"{len(queries)} head checks clean"
    return Check("invariants", not blocking, detail)


def _frozen(frozen: dict[str, Any] | None, upgraded: catalog.Catalog) -> Check:
    """The upgraded schema equals the frozen head catalog (fixtures/head_catalog.json)."""
    if frozen is None:
        hint = "no frozen head catalog: python -m queueguard.queue_schema.fixturegen --write"
        return Check("frozen", False, hint)
    actual = catalog.document(upgraded)
    same = actual == frozen
    detail = "" if same else json_diff(frozen, actual, labels=("frozen", "upgraded"))
    return Check("frozen", same, detail)


def _fence(fixture: Fixture, db: str, migrations: SetFacts) -> Check:
    """Legacy workers around a forced upgrade of `db` all fail, and change nothing."""
    probe = legacy.probe_fence(
        db,
        fixture.revision,
        lambda dsn: upgrade(dsn, force=True, progress=False, migrations=migrations),
        _checksums,
    )
    return Check("fence", probe.ok, probe.detail)
