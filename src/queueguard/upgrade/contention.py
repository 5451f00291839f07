"""verify's `contention` check: the upgrade gives up on a lock it cannot get, and changes
nothing.

No golden fixture ever makes `upgrade` wait: every lock it asks for is free. A step runner
that lost its `lock_timeout` would queue behind a long transaction and, with ACCESS
EXCLUSIVE requested, block every reader and writer behind itself until that transaction ends
(the outage the timeout exists to prevent). So another session holds the weakest lock that
conflicts with the revision's strongest budgeted lock (`locks.weakest_conflicting`), and the
upgrade of that revision runs with a small `--lock-timeout` and one retry: it must raise
LockTimeout within its ladder (`runner.ladder_s`, plus slack for a loaded machine) and leave
the database as it was. If it has not given up by then, the holder lets go, so a check of a
runner without a timeout ends too (and fails).
"""

from __future__ import annotations

import contextlib
import threading
import time
from dataclasses import dataclass

import psycopg
from psycopg import sql
from psycopg.rows import TupleRow

from queueguard.errors import LockTimeout, QueueguardError
from queueguard.pg.connect import connect, connection
from queueguard.revisions import MigrationSet, Revision
from queueguard.upgrade import locks
from queueguard.upgrade.checksums import fingerprint
from queueguard.upgrade.runner import ladder_s, upgrade

LOCK_TIMEOUT_MS = 100
RETRIES = 1
#: slack above the ladder: connecting, Alembic's start-up per attempt, a loaded machine
SLACK_S = 5.0
APPLICATION_NAME = "queueguard-verify-contention"


@dataclass(frozen=True)
class Outcome:
    revision: str
    table: str
    held: str  # the mode the other session held
    error: str | None  # what upgrade raised (type: first line); None: it returned
    gave_up: bool  # LockTimeout
    elapsed_s: float
    bound_s: float
    unchanged: bool

    def problems(self) -> list[str]:
        found = []
        where = f"revision {self.revision} with {self.held} held on {self.table}"
        if not self.gave_up:
            did = self.error or "it ran to the end once the lock was released"
            found.append(f"{where}: upgrade did not give up with LockTimeout ({did})")
        if self.elapsed_s > self.bound_s:
            found.append(
                f"{where}: upgrade waited {self.elapsed_s:.1f}s, beyond its ladder's "
                f"{self.bound_s:.1f}s (lock timeout {LOCK_TIMEOUT_MS} ms, {RETRIES} retry)"
            )
        if not self.unchanged:
            found.append(f"{where}: the database changed")
        return found

    def summary(self) -> str:
        return (
            f"revision {self.revision} gave up in {self.elapsed_s:.2f}s (bound "
            f"{self.bound_s:.1f}s) while another session held {self.held} on {self.table}; "
            "nothing changed"
        )


def target(migrations: MigrationSet, revision: str) -> tuple[Revision, str, str] | None:
    """The first revision after `revision` with a lock budget, the table it locks hardest,
    and the mode that makes that lock wait (None: no pending revision locks anything)."""
    for pending in migrations.pending(revision, migrations.head.id):
        budget = pending.locks or {}
        if budget:
            table, mode = max(sorted(budget.items()), key=lambda item: locks.MODES.index(item[1]))
            return pending, table, locks.weakest_conflicting(mode)
    return None


def probe(dsn: str, migrations: MigrationSet, revision: str) -> Outcome | None:
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
    release = threading.Timer(bound, _release, (holder,))
    error: str | None = None
    gave_up = False
    try:
        holder.execute(
            sql.SQL("LOCK TABLE {} IN {} MODE").format(sql.Identifier(table), sql.SQL(mode))
        )
        release.start()
        started = time.monotonic()
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
        elapsed = time.monotonic() - started
    finally:
        release.cancel()
        _release(holder)
        holder.close()
    with connection(dsn) as conn:
        unchanged = fingerprint(conn) == before
    return Outcome(probed.id, table, mode, error, gave_up, elapsed, bound, unchanged)


def _release(holder: psycopg.Connection[TupleRow]) -> None:
    with contextlib.suppress(psycopg.Error):  # already released or closed
        holder.rollback()


def _first(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]
