"""verify's `contention` check: the upgrade gives up on a lock it cannot get, and changes
nothing.

No golden fixture ever makes `upgrade` wait: every lock it asks for is free. A step runner
that lost its `lock_timeout` would queue behind a long transaction and, with ACCESS
EXCLUSIVE requested, block every reader and writer behind itself until that transaction ends
(the outage the timeout exists to prevent). So another session holds the weakest lock that
conflicts with the revision's strongest budgeted lock (`locks.weakest_conflicting`), and the
upgrade of that revision runs with a small `--lock-timeout` and one retry: it must raise
LockTimeout within its ladder (`ladder.ladder_s`, plus slack for a loaded machine) and leave
the database as it was. If it has not given up by then, the holder lets go, so a check of a
runner without a timeout ends too (and fails).

The ladder bounds how long the upgrade *waits for locks*, so that is what is measured: a
watcher reads `pg_blocking_pids` from its own session and notes when the upgrade is first
seen waiting for the holder; the bound runs from there to the upgrade giving up, and the
holder lets go once the upgrade has waited longer than the bound. Connecting, Alembic's
start-up, the runner lock and the checks before the first statement are no part of it:
measured from the call, on a loaded machine they alone could outlast the bound, the holder
let go before the upgrade ever asked for the lock, and a correct migration set failed the
check. Only an upgrade never seen waiting is released by a generous cap (CAP_S).
"""

from __future__ import annotations

import contextlib
import threading
import time
from dataclasses import dataclass

import psycopg
from psycopg import sql
from psycopg.rows import TupleRow

from queueguard.engine import locks
from queueguard.engine.apply.ladder import ladder_s
from queueguard.engine.checksums import fingerprint
from queueguard.errors import LockTimeout, QueueguardError
from queueguard.pg.connect import connect, connection
from queueguard.queue_schema.runner import upgrade
from queueguard.report.units import duration_s
from queueguard.revisions import RevisionFacts, SetFacts

LOCK_TIMEOUT_MS = 100
RETRIES = 1
#: slack above the ladder: the sleeps' jitter, Alembic's start-up of the retry, a loaded
#: machine (the bound runs from the first wait seen, so start-up before it is not counted)
SLACK_S = 5.0
#: the holder lets go this long after the upgrade started if it was never seen waiting (a
#: runner that never asks for the lock, or one that waits where the watcher cannot see it):
#: only so the check always ends; no verdict is read from it
CAP_S = 120.0
POLL_S = 0.02
APPLICATION_NAME = "queueguard-verify-contention"
WATCHER_NAME = "queueguard-verify-contention-watch"


@dataclass(frozen=True)
class Outcome:
    revision: str
    table: str
    held: str  # the mode the other session held
    error: str | None  # what upgrade raised (type: first line); None: it returned
    gave_up: bool  # LockTimeout
    #: from the first time the upgrade was seen waiting for the holder to its end (0: never
    #: seen waiting; a wait too short to be seen is within any bound)
    elapsed_s: float
    bound_s: float
    unchanged: bool
    #: from the call to the first wait seen (connecting, start-up; not bounded), or None
    start_s: float | None = None

    def problems(self) -> list[str]:
        found = []
        where = f"revision {self.revision} with {self.held} held on {self.table}"
        if not self.gave_up:
            did = self.error or "it ran to the end once the lock was released"
            found.append(f"{where}: upgrade did not give up with LockTimeout ({did})")
        if self.elapsed_s > self.bound_s:
            found.append(
                f"{where}: upgrade waited {duration_s(self.elapsed_s)} from its first lock wait, "
                f"beyond its ladder's "
                f"{duration_s(self.bound_s)} (lock timeout {LOCK_TIMEOUT_MS} ms, {RETRIES} retry)"
            )
        if not self.unchanged:
            found.append(f"{where}: the database changed")
        return found

    def summary(self) -> str:
        start = "" if self.start_s is None else f", {duration_s(self.start_s)} after it started"
        return (
            f"revision {self.revision} gave up {duration_s(self.elapsed_s)} after its first "
            "lock wait "
            f"(bound {duration_s(self.bound_s)}{start}) while another session held {self.held} on "
            f"{self.table}; nothing changed"
        )


def target(migrations: SetFacts, revision: str) -> tuple[RevisionFacts, str, str] | None:
    """The first revision after `revision` with a lock budget, the table it locks hardest,
    and the mode that makes that lock wait (None: no pending revision locks anything)."""
    for pending in migrations.pending(revision, migrations.head.id):
        budget = pending.locks or {}
        if budget:
            table, mode = max(sorted(budget.items()), key=lambda item: locks.MODES.index(item[1]))
            return pending, table, locks.weakest_conflicting(mode)
    return None


def probe(dsn: str, migrations: SetFacts, revision: str) -> Outcome | None:
    """On `dsn` (a scratch copy at `revision`; upgraded here up to the probed revision's
    predecessor): hold the conflicting lock, upgrade, compare."""
    found = target(migrations, revision)
    if found is None:
        return None
    probed, table, mode = found
    if probed.down_revision and probed.down_revision != revision:
        upgrade(dsn, to=probed.down_revision, progress=False, migrations=migrations)
    with connection(dsn) as conn:
        before = fingerprint(conn)
    bound = ladder_s(LOCK_TIMEOUT_MS, RETRIES) + SLACK_S
    holder = connect(dsn, application_name=APPLICATION_NAME)
    watcher: LockWatch | None = None
    error: str | None = None
    gave_up = False
    try:
        holder.execute(
            sql.SQL("LOCK TABLE {} IN {} MODE").format(sql.Identifier(table), sql.SQL(mode))
        )
        watcher = LockWatch(dsn, holder, bound)
        watcher.start()
        try:
            upgrade(
                dsn,
                to=probed.id,
                lock_timeout_ms=LOCK_TIMEOUT_MS,
                retries=RETRIES,
                progress=False,
                migrations=migrations,
            )
        except LockTimeout as exc:
            gave_up, error = True, _first(exc)
        except QueueguardError as exc:
            error = f"{type(exc).__name__}: {_first(exc)}"
        ended = time.monotonic()
    finally:
        if watcher is not None:
            watcher.stop()
        _release(holder)
        holder.close()
    assert watcher is not None  # set before anything that could not raise
    first = watcher.first_wait
    start = None if first is None else first - watcher.started
    with connection(dsn) as conn:
        unchanged = fingerprint(conn) == before
    waited = watcher.waited_s(ended)
    return Outcome(probed.id, table, mode, error, gave_up, waited, bound, unchanged, start)


class LockWatch(threading.Thread):
    """From its own session: notes when another backend of the database is first seen
    waiting for `holder` (`pg_blocking_pids`), and lets the holder go once that wait has
    lasted `bound_s` (or `cap_s` after the start if no wait is ever seen). A bound on a lock
    wait is then judged on the wait itself, never on the start-up before it (see the module
    docstring); the online path's probe judges abort's wait the same way."""

    def __init__(
        self,
        dsn: str,
        holder: psycopg.Connection[TupleRow],
        bound_s: float,
        cap_s: float = CAP_S,
    ) -> None:
        super().__init__(daemon=True)
        self.dsn, self.holder, self.bound_s, self.cap_s = dsn, holder, bound_s, cap_s
        self.holder_pid = holder.info.backend_pid
        self.started = time.monotonic()
        self.first_wait: float | None = None
        self._done = threading.Event()

    def waited_s(self, ended: float) -> float:
        """From the first wait seen to `ended` (0: never seen waiting; a wait too short for
        the watcher to see is within any bound)."""
        return 0.0 if self.first_wait is None else ended - self.first_wait

    def run(self) -> None:
        try:
            with connection(self.dsn, autocommit=True, application_name=WATCHER_NAME) as conn:
                while not self._done.is_set():
                    now = time.monotonic()
                    if self.first_wait is None and self._waiting(conn):
                        self.first_wait = now
                    since = self.started if self.first_wait is None else self.first_wait
                    limit = self.cap_s if self.first_wait is None else self.bound_s
                    if now - since > limit:
                        break
                    self._done.wait(POLL_S)
        finally:  # judged (or the watcher failed): the upgrade must never wait for it forever
            _release(self.holder)

    def _waiting(self, conn: psycopg.Connection[TupleRow]) -> bool:
        row = conn.execute(
            "SELECT EXISTS (SELECT 1 FROM pg_stat_activity "
            "WHERE datname = current_database() AND %s = ANY(pg_blocking_pids(pid)))",
            (self.holder_pid,),
        ).fetchone()
        return bool(row and row[0])

    def stop(self) -> None:
        self._done.set()
        self.join()


def _release(holder: psycopg.Connection[TupleRow]) -> None:
    with contextlib.suppress(psycopg.Error):  # already released or closed
        holder.rollback()


def _first(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]
