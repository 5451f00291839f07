"""The online path's control behaviour, probed on a scratch copy (`queueguard verify`'s
`online` check): what a quiescent end-state comparison cannot see.

- the window: v0.4 hosts start against the expanded database; a queue one of them loaded
  refuses a v0.3 load (`queue_owned_by_protocol_4`) while other queues still take v0.3 loads;
- the lease: a second migrator is turned away while the first holds it, and takes over once
  it expired;
- abort: refused while a protocol-4 host is connected; then back to [3, 3] with the additive
  state gone (the catalog of the revision before) and every task still there.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from queueguard.core.keys import PhysicalQueue
from queueguard.core.store import QueueState
from queueguard.errors import HostsConnected, MigratorBusy, QueueguardError
from queueguard.pg.connect import connection
from queueguard.revisions import MigrationSet
from queueguard.stores.postgres import PostgresStore
from queueguard.upgrade import catalog
from queueguard.upgrade.legacy.workers import LegacyQueue, V03Worker
from queueguard.upgrade.online import phases
from queueguard.upgrade.online.equivalence import task_multiset
from queueguard.upgrade.online.report import OnlineReport
from queueguard.upgrade.online.session import Knobs, Session, statements

NAMESPACE = "queueguard-verify"
KNOBS = Knobs(batch_size=2, max_lag_s=None, lease_s=30, wait_s=0)
HELD = PhysicalQueue(NAMESPACE, "held-by-v04", "workflow", 0)
FREE = LegacyQueue(NAMESPACE, "free")


def _quiet(_message: object) -> None:
    pass


def probe(dsn: str, migrations: MigrationSet, export: Callable[[str], dict[str, Any]]) -> list[str]:
    """Problems found on `dsn` (a scratch copy at the online path's starting revision; the
    probe writes to it)."""
    target = migrations.head.id
    sql = statements(migrations, target)
    with connection(dsn) as conn:
        before_catalog = catalog.introspect(conn)
    before = _without_directives(export(dsn))
    problems: list[str] = []
    session = Session(dsn, target=target, sql=sql, knobs=KNOBS)
    held: QueueState | None = None
    try:
        report = OnlineReport(target, None, None)
        phases.expand(session, migrations, report, _quiet)
        host = PostgresStore(dsn, host_id="verify-probe", pool_size=1, create_schema=False)
        try:
            problems += _window(dsn, host)
            held = host.queue_state(HELD)
            problems += _lease(dsn, sql, target, session)
            phases.migrate(session, report, _quiet)
            try:
                phases.abort(session, report, _quiet, force=False)
                problems.append("abort ran while a protocol-4 host was connected")
            except HostsConnected:
                pass
        finally:
            host.close()
        phases.abort(session, report, _quiet, force=False)
    finally:
        session.close()
    with connection(dsn) as conn:
        window = conn.execute("SELECT min_protocol, max_protocol FROM runtime_protocol").fetchall()
        fenced = conn.execute(
            "SELECT range_id FROM task_queues WHERE physical_queue = %s", (HELD.key,)
        ).fetchall()
        untouched = conn.execute(
            "SELECT range_id FROM task_queues WHERE physical_queue = %s", (FREE.key,)
        ).fetchall()
        differences = catalog.diff(before_catalog, catalog.introspect(conn))
    if held is None or fenced != [(held.range_id + 1,)]:
        problems.append(f"abort did not fence the v0.4 host's queue: {held} -> {fenced}")
    if untouched != [(1,)]:  # the v0.3 host loaded it once; abort leaves v0.3 hosts alone
        problems.append(f"abort moved the range of a queue a v0.3 host holds: {untouched}")
    if window != [(3, 3)]:
        problems.append(f"after abort the protocol window is {window}, not [(3, 3)]")
    problems += [f"after abort: {d}" for d in differences[:10]]
    after = _without_directives(export(dsn))
    probe_tasks = sum(n for key, n in after.items() if key[0] == NAMESPACE)
    after = {k: n for k, n in after.items() if k[0] != NAMESPACE}
    if after != before or probe_tasks:
        problems.append("after abort the tasks differ from before the rollout")
    return problems


def _without_directives(doc: dict[str, Any]) -> dict[tuple[Any, ...], int]:
    return {key[:-1]: n for key, n in task_multiset(doc).items()}


def _window(dsn: str, host: PostgresStore) -> list[str]:
    """A v0.4 load marks its queue; v0.3 loads of it are refused, of others not."""
    problems = []
    state = host.load_queue(HELD)
    with V03Worker(dsn, host_id="verify-probe") as old:
        old.start()
        try:
            old.load(LegacyQueue(NAMESPACE, "held-by-v04"))
            problems.append("a v0.3 host loaded a queue a v0.4 host holds")
        except QueueguardError as exc:
            if "queue_owned_by_protocol_4" not in str(exc):
                problems.append(f"a v0.3 load of a v0.4 queue failed otherwise: {exc}")
        try:
            old.load(FREE)
        except QueueguardError as exc:
            problems.append(f"a v0.3 load of a free queue was refused: {exc}")
    again = host.queue_state(HELD)
    if again is None or again.range_id != state.range_id:
        problems.append(f"the v0.4 host's range moved: {state} -> {again}")
    return problems


def _lease(dsn: str, sql: dict[str, dict[str, str]], target: str, first: Session) -> list[str]:
    """One migrator at a time; a lease that expired is taken over."""
    problems = []
    first.transaction(lambda _c: None, phases=("migrate",), what="probe: lease")
    second = Session(dsn, target=target, sql=sql, knobs=KNOBS)
    try:
        try:
            second.transaction(lambda _c: None, phases=("migrate",), what="probe: lease")
            problems.append("a second migrator took the lease while the first held it")
        except MigratorBusy:
            pass
        with connection(dsn) as conn:
            conn.execute("UPDATE queueguard_rollout SET lease_until = now() - interval '1s'")
            conn.commit()
        try:
            second.transaction(lambda _c: None, phases=("migrate",), what="probe: lease")
        except MigratorBusy:
            problems.append("a second migrator could not take an expired lease")
        second.release()
    finally:
        second.close()
    return problems
