"""The online probe's checks of abort (`probe`): abort after an expand interrupted right
after it recorded the rollout; abort waits for a load in flight, refuses while a v0.4 host of
this database is connected (not of another), then fences only v0.4-held queues and returns to
[3, 3], the previous catalog and every task.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any

import psycopg

from queueguard.core.store import QueueState
from queueguard.engine import catalog
from queueguard.errors import HostsConnected, LockTimeout, QueueguardError
from queueguard.pg.connect import connect, connection
from queueguard.pg.scratch import database_dsn
from queueguard.queue_schema.contention import LockWatch
from queueguard.queue_schema.online import phases
from queueguard.queue_schema.online.equivalence import task_multiset
from queueguard.queue_schema.online.probe_common import (
    FREE,
    HELD,
    KNOBS,
    NAMESPACE,
    Export,
    quiet,
    range_of,
    wait_gone,
)
from queueguard.queue_schema.online.report import OnlineReport
from queueguard.queue_schema.online.session import Session
from queueguard.report.units import duration_s
from queueguard.revisions import SetFacts


def abort_interrupted_expand(
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
        phases.abort(session, report, quiet, force=False)
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


def _rollback_quietly(conn: Any) -> None:
    with contextlib.suppress(psycopg.Error):
        conn.rollback()


def abort_refusals(dsn: str, session: Session, report: OnlineReport) -> list[str]:
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
            phases.abort(session, report, quiet, force=False)
            found.append("abort did not wait for a load in flight")
        except LockTimeout:
            waited = watch.waited_s(time.monotonic())
            if waited > bound_s:
                found.append(
                    f"abort waited {duration_s(waited)} for a load in flight, "
                    f"beyond {duration_s(bound_s)}"
                )
    finally:
        if watch is not None:
            watch.stop()
        _rollback_quietly(loading)
        loading.close()
    here = connect(dsn, application_name="queueguard/4 host=here")
    elsewhere = connect(database_dsn(dsn, "postgres"), application_name="queueguard/4 host=other")
    try:
        phases.abort(session, report, quiet, force=False)
        found.append("abort ran while a protocol-4 host was connected")
    except HostsConnected as exc:
        if "host=other" in str(exc) or "host=here" not in str(exc):
            found.append(f"abort named the wrong protocol-4 hosts: {exc}")
    finally:
        here.close()
        elsewhere.close()
        wait_gone(dsn, "queueguard/4 host=here")
    return found


def aborted(
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
    fenced = range_of(dsn, HELD.key)
    if held is None or fenced != held.range_id + 1:
        found.append(f"abort did not fence the v0.4 host's queue: {held} -> {fenced}")
    if range_of(dsn, FREE.key) != 1:  # the v0.3 host loaded it once; abort leaves it alone
        found.append("abort moved the range of a queue a v0.3 host holds")
    found += [f"after abort: {d}" for d in differences[:10]]
    before, after = _without_directives(before_doc), _without_directives(export(dsn))
    if {k: n for k, n in after.items() if k[0] != NAMESPACE} != before:
        found.append("after abort the tasks differ from before the rollout")
    return found


def _without_directives(doc: dict[str, Any]) -> dict[tuple[Any, ...], int]:
    return {key[:-1]: n for key, n in task_multiset(doc).items()}
