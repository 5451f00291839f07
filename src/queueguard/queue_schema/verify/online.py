"""verify's check of the online path (`upgrade --online`) on a fixture: the offline end state,
rows, ledger, catalog and invariants reached online while a fleet holds queues, then the
window, the lease and abort on a second copy."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from queueguard.engine import catalog
from queueguard.engine.verify.fresh import against_fresh
from queueguard.errors import QueueguardError
from queueguard.pg.connect import connection
from queueguard.pg.scratch import ScratchDatabases, dbname_of
from queueguard.queue_schema import online, rows, status
from queueguard.queue_schema.golden import Fixture
from queueguard.queue_schema.manifest import online_files
from queueguard.queue_schema.online import edges, equivalence
from queueguard.queue_schema.online.probe import NAMESPACE, Fleet, probe
from queueguard.queue_schema.runner import upgrade
from queueguard.queue_schema.verify.offline import _invariants
from queueguard.queue_schema.verify.reads import _clock, _export, _rows, _whole
from queueguard.queue_schema.verify.report import Check
from queueguard.revisions import SetFacts


def _online(*args: Any) -> Check:
    """`_online_path`; a refusal or failure of the path fails the check (naming it)."""
    try:
        return _online_path(*args)
    except QueueguardError as exc:
        return Check("online", False, f"{type(exc).__name__}: {exc}")


def _online_path(
    fixture: Fixture,
    scratch: ScratchDatabases,
    template: str,
    offline_db: str,
    fresh_catalog: Any,
    migrations: SetFacts,
    fail_fast: bool = False,
) -> Check:
    """The online path (expand, migrate in batches of two rows, contract) reaches the offline
    end state on the fixture plus the edge cases no fixture holds (`online.edges`; beside the
    documented range difference: exactly one more fence on each legacy @auto queue that held
    rows), the same ledger, the fresh catalog and the head's invariants,
    while a v0.4 and a v0.3 host hold a queue each (`online.probe.Fleet`); on a second copy,
    the window, the lease and abort behave (`online.probe.probe`)."""
    head = migrations.head
    previous = migrations.previous(head.id)
    if not online_files(head.id, Path(migrations.root)):
        return Check("online", True, f"revision {head.id} has no online path")
    if previous is None or not migrations.at_or_after(previous, fixture.revision):
        return Check("online", True, f"fixture at {fixture.revision}: not before {previous}")
    db = scratch.create(template)
    if fixture.revision != previous:
        upgrade(db, to=previous, progress=False, migrations=migrations)
    with connection(db) as conn:  # what no fixture holds, compared alike (online.edges)
        edges.seed(conn)
        conn.commit()
        work = edges.Work.read(conn)
    offline_edges = scratch.create(dbname_of(db))
    since = _clock(offline_edges)
    upgrade(offline_edges, progress=False, migrations=migrations)
    offline = _export(offline_edges)
    offline_rows = _whole(offline_edges, since, migrations)
    probed = scratch.create(dbname_of(db))
    knobs = online.Knobs(batch_size=2, max_lag_s=None)
    since = _clock(db)
    expanded = online.run(db, phase="expand", knobs=knobs, migrations=migrations, watch=True)
    fleet = Fleet(db)
    report = online.run(db, knobs=knobs, migrations=migrations, tell=fleet.tell, watch=True)
    problems = fleet.problems() + work.problems([expanded, report], knobs.batch_size)
    mine = _export(db)
    mine["queues"] = [q for q in mine["queues"] if not q["physicalQueue"].startswith(FLEET)]
    problems += equivalence.quiescent_differences(offline, mine, sources=set(work.sources))
    problems += [f"rows: {d}" for d in _online_rows(offline_rows, _whole(db, since, migrations))]
    if _rows(db, _LEDGER) != _rows(offline_db, _LEDGER):
        problems.append("the ledger differs from the offline upgrade's")
    problems += against_fresh(catalog.introspect(db), fresh_catalog)[0]
    invariants = _invariants(db, migrations)
    if not invariants.ok:
        problems.append(invariants.detail)
    if not (fail_fast and problems):
        problems += [f"probe: {p}" for p in probe(probed, migrations, _export)]
    detail = (
        "\n".join(problems[:30])
        if problems
        else f"{report.batches} batches, {report.rows_relocated} rows relocated, "
        f"{report.directives} directives"
    )
    return Check("online", not problems and report.phase == "done", detail)


_LEDGER = status.Q["ledger"]
FLEET = f"{NAMESPACE}/"


def _online_rows(offline: rows.Doc, online_rows: rows.Doc) -> list[str]:
    """Every column of every row, online against offline on the same input: beside the
    documented range difference (compared by `equivalence`) and the probe fleet's queues."""

    def keep(_table: str, row: dict[str, Any]) -> bool:
        return not str(row.get("physical_queue", "")).startswith(FLEET)

    without = {"task_queues": {"range_id"}}
    return rows.differences(
        rows.project(offline, without=without),
        rows.project(online_rows, without=without, keep=keep),
    )
