"""The online path's control behaviour, probed on scratch copies (`queueguard verify`'s
`online` check): what a quiescent end-state comparison cannot see.

- `Fleet` (during the compared run): a v0.4 host holds one queue, a v0.3 host loaded another;
  contract must fence the second and leave the first alone (a fleet on v0.4 goes on); a queue
  the v0.4 host loads after contract closed the window, before contract's last move, must not
  trust its own counter;
- `probe` (a second copy): after expand, the window is [3, 4], the marker index serves the
  directive batches and the remaining counts are right; a v0.4-held queue refuses a v0.3 load,
  other queues do not; one migrator at a time (busy while held or mid-batch, taken over once
  expired, released at the end); the rollout record counts what migrate did; abort waits for
  a load in flight, refuses while a v0.4 host of this database is connected (not of another),
  then fences only v0.4-held queues and returns to [3, 3], the previous catalog and every task.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable
from typing import Any

import psycopg
import psycopg.sql

from queueguard.core.keys import PhysicalQueue
from queueguard.core.store import QueueState
from queueguard.errors import (
    HostsConnected,
    LockTimeout,
    MigratorBusy,
    QueueguardError,
    RolloutRefused,
)
from queueguard.pg.connect import connect, connection
from queueguard.pg.scratch import database_dsn
from queueguard.revisions import SetFacts
from queueguard.stores.postgres import PostgresStore
from queueguard.upgrade import catalog, status
from queueguard.upgrade.contention import LockWatch
from queueguard.upgrade.legacy.workers import LegacyQueue, V03Worker
from queueguard.upgrade.online import batches, phases
from queueguard.upgrade.online.between import Between
from queueguard.upgrade.online.equivalence import task_multiset
from queueguard.upgrade.online.report import OnlineReport
from queueguard.upgrade.online.session import Knobs, Session, statements
from queueguard.upgrade.online.watch import Watch

NAMESPACE = "queueguard-verify"
KNOBS = Knobs(batch_size=2, max_lag_s=None, lease_s=30, wait_s=0, retries=0)
HELD = PhysicalQueue(NAMESPACE, "held-by-v04", "workflow", 0)
FREE = LegacyQueue(NAMESPACE, "free")
CLOSING = PhysicalQueue(NAMESPACE, "loaded-while-closing", "workflow", 0)
Export = Callable[[str], dict[str, Any]]


def _quiet(_message: object) -> None:
    pass


#: how long to wait for something that happens in a moment on an idle machine (a closed
#: backend leaving pg_stat_activity, a build showing in the progress view): generous, since
#: on a loaded one a moment can last seconds, and a bound that ran out would fail a correct
#: migration set; waiting costs nothing when it comes at once
MOMENT_S = 60.0


def wait_gone(dsn: str, application_name: str, timeout_s: float = MOMENT_S) -> None:
    """A closed connection's backend leaves pg_stat_activity a moment later: wait for it (in
    this database: other runs on the server name their hosts alike)."""
    deadline = time.monotonic() + timeout_s
    with connection(dsn, autocommit=True) as conn:
        while time.monotonic() < deadline:
            found = conn.execute(
                "SELECT 1 FROM pg_stat_activity "
                "WHERE application_name = %s AND datname = current_database()",
                (application_name,),
            ).fetchone()
            if found is None:
                return
            time.sleep(0.02)


def _range(dsn: str, key: str) -> int | None:
    with connection(dsn) as conn:
        row = conn.execute(
            "SELECT range_id FROM task_queues WHERE physical_queue = %s", (key,)
        ).fetchone()
    return int(row[0]) if row else None


class Fleet:
    """A v0.4 host holding HELD and a v0.3 host that loaded FREE, around contract; the v0.4
    host also loads CLOSING right after contract closed the window (`tell`)."""

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self.host = PostgresStore(dsn, host_id="verify-fleet", pool_size=1, create_schema=False)
        self.held = self.host.load_queue(HELD)
        self.closing: QueueState | None = None
        with V03Worker(dsn, host_id="verify-fleet") as old:
            old.start()
            self.free = old.load(FREE)

    def tell(self, message: object) -> None:
        """online.run's progress: once the window is closed, contract still moves what v0.3
        hosts wrote into default queues, so a queue loaded now must not trust its counter."""
        if str(message).startswith("contract: window closed"):
            self.closing = self.host.load_queue(CLOSING)

    def problems(self) -> list[str]:
        """After contract (closes the v0.4 host)."""
        self.host.close()
        found = []
        if self.closing is None:
            found.append("contract never reported closing the window")
        elif not self.closing.shared:
            found.append(
                "a queue loaded after contract closed the window (its moves still to come) "
                "trusts its own counter: rows contract moves into it would be stranded"
            )
        if _range(self.dsn, HELD.key) != self.held.range_id:
            found.append("contract fenced a queue a v0.4 host holds")
        if _range(self.dsn, FREE.key) != self.free.range_id + 1:
            found.append("contract did not fence (exactly once) a queue a v0.3 host holds")
        return found


def probe(dsn: str, migrations: SetFacts, export: Export) -> list[str]:
    """Problems found on `dsn` (a scratch copy at the online path's starting revision; the
    probe writes to it)."""
    target = migrations.head.id
    sql = statements(migrations, target)
    with connection(dsn) as conn:
        before_catalog = catalog.introspect(conn)
    before_doc = export(dsn)
    problems: list[str] = []
    ceiling = migrations.head.online_locks
    watch = Watch(dsn, target, ceiling)
    session = Session(dsn, target=target, sql=sql, knobs=KNOBS, ceiling=ceiling, watch=watch)
    held: QueueState | None = None
    report = OnlineReport(target, None, None)
    _other_schema(dsn)
    try:
        problems += _abort_interrupted_expand(dsn, session, migrations, before_catalog)
        _failed_build(dsn)
        refused = _expand_beside_another_build(dsn, session, migrations, report)
        if refused:
            return problems + refused
        problems += _expanded(dsn, session, before_doc)
        host = PostgresStore(dsn, host_id="verify-probe", pool_size=1, create_schema=False)
        try:
            problems += _window(dsn, host)
            held = host.queue_state(HELD)
            problems += _lease(dsn, sql, target, session)
            between = Between(dsn, NAMESPACE)
            between.start()
            started = time.monotonic()
            phases.migrate(session, report, between)
            took = time.monotonic() - started - between.spent_s  # the observer's reads aside
            problems += between.problems
            if not between.boundaries:
                problems.append("migrate reported no batch: nothing was checked between batches")
            problems += _progress(dsn, report, migrations, took, session.holder)
        finally:
            host.close()
            wait_gone(dsn, host.application_name)
        problems += _abort_refusals(dsn, session, report)
        phases.abort(session, report, _quiet, force=False)
    finally:
        session.close()
        _drop_other_schema(dsn)
    return problems + _aborted(dsn, held, before_catalog, before_doc, export)


#: another schema of the same database, with what the online path must not mistake for its
#: own: a table with a `protocol4_range` column, an index being built concurrently
OTHER = "queueguard_verify_other"


def _other_schema(dsn: str) -> None:
    with connection(dsn) as conn:
        conn.execute(f"CREATE SCHEMA {OTHER}")
        conn.execute(f"CREATE TABLE {OTHER}.queues (id bigint PRIMARY KEY, protocol4_range bigint)")
        conn.execute(f"INSERT INTO {OTHER}.queues VALUES (1, 1), (2, NULL)")
        conn.commit()


def _drop_other_schema(dsn: str) -> None:
    with connection(dsn) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {OTHER} CASCADE")
        conn.commit()


def _expand_beside_another_build(
    dsn: str, session: Session, migrations: SetFacts, report: OnlineReport
) -> list[str]:
    """expand, while a CREATE INDEX CONCURRENTLY of another index (another schema's table)
    is in progress: expand must tell it from a build of its own marker index and go on.
    The other build waits for a writer's transaction that ends once expand has returned."""
    writer = connect(dsn)
    builder = connect(dsn, autocommit=True)
    build = threading.Thread(
        target=_build_quietly,
        args=(
            builder,
            f"CREATE INDEX CONCURRENTLY other_build ON {OTHER}.queues (protocol4_range)",
        ),
        daemon=True,
    )
    try:
        writer.execute(f"LOCK TABLE {OTHER}.queues IN ROW EXCLUSIVE MODE")
        build.start()
        if not _building(dsn, builder.info.backend_pid):
            return ["the other index build never showed in pg_stat_progress_create_index"]
        try:
            phases.expand(session, migrations, report, _quiet)
        except RolloutRefused as exc:
            return [f"expand refused while another index (not the marker) was being built: {exc}"]
        return []
    finally:
        writer.rollback()
        writer.close()
        build.join(timeout=30)
        builder.close()


def _rollback_quietly(conn: Any) -> None:
    with contextlib.suppress(psycopg.Error):
        conn.rollback()


def _build_quietly(builder: Any, statement: str) -> None:
    with contextlib.suppress(Exception):
        builder.execute(statement)


def _building(dsn: str, pid: int, timeout_s: float = MOMENT_S) -> bool:
    deadline = time.monotonic() + timeout_s
    with connection(dsn, autocommit=True) as conn:
        while time.monotonic() < deadline:
            if conn.execute(
                "SELECT 1 FROM pg_stat_progress_create_index WHERE pid = %s", (pid,)
            ).fetchone():
                return True
            time.sleep(0.01)
    return False


def _abort_interrupted_expand(
    dsn: str, session: Session, migrations: SetFacts, before: Any
) -> list[str]:
    """An expand interrupted right after it recorded the rollout (no owner column, no index
    yet) is aborted cleanly: window [3, 3], no record, the previous catalog."""
    previous = migrations.previous(session.target)
    session.transaction(
        lambda cursor: phases.create_record(session, cursor, previous),
        phases=None,
        what="probe: expand interrupted",
    )
    report = OnlineReport(session.target, None, None)
    try:
        phases.abort(session, report, _quiet, force=False)
    except (QueueguardError, psycopg.Error) as exc:
        return [f"abort after an interrupted expand failed: {type(exc).__name__}: {exc}"]
    with connection(dsn) as conn:
        after = catalog.introspect(conn)
        window = conn.execute("SELECT min_protocol, max_protocol FROM runtime_protocol")
        found = window.fetchall()
    problems = [f"abort after an interrupted expand: {d}" for d in catalog.diff(before, after)]
    if found != [(3, 3)]:
        problems.append(f"abort after an interrupted expand left the window at {found}")
    return problems


def _failed_build(dsn: str) -> None:
    """Leave what a CREATE INDEX CONCURRENTLY that failed half-way leaves: an invalid index of
    the marker's name (here a wrong one). expand must replace it: `_expanded` then finds the
    rows through the right one. Marking an index invalid takes a superuser; other roles skip
    this part."""
    with connection(dsn) as conn:
        superuser = conn.execute(
            "SELECT rolsuper FROM pg_roles WHERE rolname = current_user"
        ).fetchone()
        if not superuser or not superuser[0]:
            return
        conn.execute("CREATE INDEX queueguard_rollout_pending_directive ON tasks (task_id)")
        conn.execute(
            "UPDATE pg_index SET indisvalid = false "
            "WHERE indexrelid = 'queueguard_rollout_pending_directive'::regclass"
        )
        conn.commit()


def _expanded(dsn: str, session: Session, before: dict[str, Any]) -> list[str]:
    """The window, the marker index and the remaining counts, right after expand."""
    found = []
    with connection(dsn) as conn:
        window = conn.execute("SELECT min_protocol, max_protocol FROM runtime_protocol").fetchall()
        # The rows still without a directive are found through the marker index (an index
        # whose predicate does not match cannot serve the count, whatever it costs).
        conn.execute("SET enable_seqscan = off")
        plan = conn.execute("EXPLAIN (FORMAT JSON) " + session.q("migrate.remaining")).fetchone()
        # …and so can each directive batch's: without the primary key (dropped in this
        # transaction, rolled back) a batch whose predicate does not imply the index's has
        # only the table to scan, every batch (the plan's choice between two usable indexes
        # would depend on the data)
        conn.execute("SET lock_timeout = '5s'")
        for (pkey,) in conn.execute(_PRIMARY_KEY, ("tasks",)).fetchall():
            conn.execute(
                psycopg.sql.SQL("ALTER TABLE tasks DROP CONSTRAINT {}").format(
                    psycopg.sql.Identifier(pkey)
                )
            )
        batch_plan = conn.execute(
            "EXPLAIN (FORMAT JSON) " + session.q("migrate.directive_batch"),
            {"after_queue": "", "after_id": -1, "limit": KNOBS.batch_size},
        ).fetchone()
        conn.rollback()
    if window != [(3, 4)]:
        found.append(f"after expand the protocol window is {window}, not [(3, 4)]")
    if "queueguard_rollout_pending_directive" not in json.dumps(plan):
        found.append("the rows without a directive are not found through the marker index")
    if "queueguard_rollout_pending_directive" not in json.dumps(batch_plan):
        found.append("a directive batch does not find its rows through the marker index")
    directives = sum(
        1
        for q in before["queues"]
        if not q["physicalQueue"].endswith("@auto")
        for t in q["tasks"]
        if isinstance(t["data"].get("task"), dict) and "versionDirective" not in t["data"]["task"]
    )
    relocations = sum(
        len(q["tasks"]) for q in before["queues"] if q["physicalQueue"].endswith("@auto")
    )
    counted = batches.remaining(session)
    if counted != (directives, relocations):
        found.append(f"remaining counts {counted}, expected {(directives, relocations)}")
    with connection(dsn) as conn:  # migrate has not run: its counters start from nothing
        record = conn.execute(
            "SELECT rows_done, migrate_seconds FROM queueguard_rollout"
        ).fetchall()
    if record != [(0, 0.0)]:
        found.append(f"before migrate the rollout record counts (rows, seconds) {record}, not 0")
    return found


_PRIMARY_KEY = (
    "SELECT conname::text FROM pg_constraint WHERE conrelid = to_regclass(%s) AND contype = 'p'"
)


def _window(dsn: str, host: PostgresStore) -> list[str]:
    """A v0.4 load marks its queue; v0.3 loads of it are refused, of others not."""
    found = []
    state = host.load_queue(HELD)
    with V03Worker(dsn, host_id="verify-probe") as old:
        old.start()
        try:
            old.load(LegacyQueue(NAMESPACE, HELD.task_queue))
            found.append("a v0.3 host loaded a queue a v0.4 host holds")
        except QueueguardError as exc:
            if "queue_owned_by_protocol_4" not in str(exc):
                found.append(f"a v0.3 load of a v0.4 queue failed otherwise: {exc}")
        try:
            old.load(FREE)
        except QueueguardError as exc:
            found.append(f"a v0.3 load of a free queue was refused: {exc}")
    again = host.queue_state(HELD)
    if again is None or again.range_id != state.range_id:
        found.append(f"the v0.4 host's range moved: {state} -> {again}")
    return found


def _lease(dsn: str, sql: dict[str, dict[str, str]], target: str, first: Session) -> list[str]:
    """One migrator at a time; a lease that expired is taken over; a release frees it."""
    found = []
    # The lease's length from the transaction that took it (its now()), not from a later
    # read: the gap between the two would eat into the window on a loaded machine.
    taken = first.transaction(
        lambda c: c.execute("SELECT now()").fetchone()[0],  # type: ignore[index]
        phases=("migrate",),
        what="probe: lease",
    )
    with connection(dsn) as conn:
        holder, left = conn.execute(
            "SELECT holder, extract(epoch FROM lease_until - %s) FROM queueguard_rollout",
            (taken,),
        ).fetchone() or (None, None)
    if holder != first.holder or not KNOBS.lease_s - 5 < float(left or 0) <= KNOBS.lease_s:
        found.append(f"the lease is {holder!r} for {left}s, not {first.holder!r} for ~30s")
    second = Session(dsn, target=target, sql=sql, knobs=KNOBS)
    try:
        if _takes(second):
            found.append("a second migrator took the lease while the first held it")
        with connection(dsn) as conn:
            conn.execute("UPDATE queueguard_rollout SET lease_until = now() - interval '1s'")
            conn.commit()
        in_batch = connect(dsn)  # another migrator inside a batch: its row lock
        try:
            in_batch.execute("SELECT 1 FROM queueguard_rollout FOR UPDATE")
            try:
                if _takes(second):
                    found.append("a second migrator took the lease during a batch")
            except LockTimeout:
                found.append("a second migrator queued behind a batch instead of waiting")
        finally:
            in_batch.rollback()
            in_batch.close()
        if not _takes(second):
            found.append("a second migrator could not take an expired lease")
        first.release()  # the first, its lease taken over, must not free the second's
        if _lease_holder(dsn) != second.holder:
            found.append("a migrator whose lease was taken over released its successor's")
        second.release()
        with connection(dsn) as conn:
            left_holder = conn.execute("SELECT holder FROM queueguard_rollout").fetchall()
        if left_holder != [(None,)]:
            found.append(f"a released lease is still held: {left_holder}")
    finally:
        second.close()
    return found


def _lease_holder(dsn: str) -> str | None:
    with connection(dsn) as conn:
        row = conn.execute("SELECT holder FROM queueguard_rollout").fetchone()
    return str(row[0]) if row and row[0] is not None else None


def _takes(session: Session) -> bool:
    try:
        session.transaction(lambda _c: None, phases=("migrate",), what="probe: lease")
    except MigratorBusy:
        return False
    return True


def _progress(
    dsn: str, report: OnlineReport, migrations: SetFacts, took_s: float, holder: str
) -> list[str]:
    """The rollout record counts what migrate did, with sane times, and `status` shows it
    (the lease is still `holder`'s)."""
    found = []
    with connection(dsn) as conn:
        row = conn.execute(
            "SELECT rows_done, migrate_seconds, migrate_seconds BETWEEN 0 AND %s, "
            "started_at <= updated_at, updated_at <= now(), "
            "now() - started_at < interval '1 hour' FROM queueguard_rollout",
            (took_s,),
        ).fetchone()
        shown = status.rollout_status(conn, migrations)
    done = report.directives + report.rows_relocated
    if row is None or row[0] != done or not all(row[2:]):
        found.append(f"the rollout record says {row}, migrate did {done} rows in {took_s:.2f}s")
        return found
    rate = round(done / row[1], 1) if row[1] else None
    expected = {
        "phase": "contract",
        "rowsDone": done,
        "rowsLeft": {"directives": 0, "relocations": 0},
        "etaSeconds": None,
        "migrator": holder,
        "rowsPerSecond": rate,
    }
    seen = {key: (shown or {}).get(key) for key in expected}
    if seen != expected or not shown or not shown["startedAt"] <= shown["updatedAt"]:
        found.append(f"status shows the rollout as {shown}, expected {expected}")
    return found


def _abort_refusals(dsn: str, session: Session, report: OnlineReport) -> list[str]:
    """Abort waits for a load in flight (runtime_protocol locked first) and refuses while a
    v0.4 host of this database is connected, not one of another database."""
    found = []
    loading = connect(dsn)
    # A migrator without its lock_timeout would wait for the load forever: the load ends
    # once abort has waited for it longer than its ladder (one attempt, KNOBS.retries = 0)
    # plus slack, so abort then goes through and is reported instead of hanging verify. The
    # bound runs from abort's first lock wait (`LockWatch`), not from the call: the reads
    # before it are no part of the ladder, and on a loaded machine they alone could outlast
    # it (the load let go before abort asked for the lock: a correct abort "did not wait").
    bound_s = KNOBS.lock_timeout_ms * (KNOBS.retries + 1) / 1000 + 5.0
    watch: LockWatch | None = None
    try:
        loading.execute("SELECT min_protocol FROM runtime_protocol")  # a handshake in flight
        watch = LockWatch(dsn, loading, bound_s)
        watch.start()
        try:
            phases.abort(session, report, _quiet, force=False)
            found.append("abort did not wait for a load in flight")
        except LockTimeout:
            waited = watch.waited_s(time.monotonic())
            if waited > bound_s:
                found.append(
                    f"abort waited {waited:.1f}s for a load in flight, beyond {bound_s:.1f}s"
                )
    finally:
        if watch is not None:
            watch.stop()
        _rollback_quietly(loading)
        loading.close()
    here = connect(dsn, application_name="queueguard/4 host=here")
    elsewhere = connect(database_dsn(dsn, "postgres"), application_name="queueguard/4 host=other")
    try:
        phases.abort(session, report, _quiet, force=False)
        found.append("abort ran while a protocol-4 host was connected")
    except HostsConnected as exc:
        if "host=other" in str(exc) or "host=here" not in str(exc):
            found.append(f"abort named the wrong protocol-4 hosts: {exc}")
    finally:
        here.close()
        elsewhere.close()
        wait_gone(dsn, "queueguard/4 host=here")
    return found


def _aborted(
    dsn: str,
    held: QueueState | None,
    before_catalog: catalog.Catalog,
    before_doc: dict[str, Any],
    export: Export,
) -> list[str]:
    found = []
    with connection(dsn) as conn:
        window = conn.execute("SELECT min_protocol, max_protocol FROM runtime_protocol").fetchall()
        differences = catalog.diff(before_catalog, catalog.introspect(conn))
    if window != [(3, 3)]:
        found.append(f"after abort the protocol window is {window}, not [(3, 3)]")
    fenced = _range(dsn, HELD.key)
    if held is None or fenced != held.range_id + 1:
        found.append(f"abort did not fence the v0.4 host's queue: {held} -> {fenced}")
    if _range(dsn, FREE.key) != 1:  # the v0.3 host loaded it once; abort leaves it alone
        found.append("abort moved the range of a queue a v0.3 host holds")
    found += [f"after abort: {d}" for d in differences[:10]]
    before, after = _without_directives(before_doc), _without_directives(export(dsn))
    if {k: n for k, n in after.items() if k[0] != NAMESPACE} != before:
        found.append("after abort the tasks differ from before the rollout")
    return found


def _without_directives(doc: dict[str, Any]) -> dict[tuple[Any, ...], int]:
    return {key[:-1]: n for key, n in task_multiset(doc).items()}
