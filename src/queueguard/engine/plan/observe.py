"""Watching statements run: which relations each one locked and in which mode, which it
rewrote (a new file node) or scanned (`pg_stat_xact_user_tables`), and how long it took.

Nothing here is looked up in a rule table: PostgreSQL says what it did. A statement inside a
transaction is read from its own session before and after (its locks are the ones it added
to the transaction's). A statement that cannot run in a transaction block (`CREATE INDEX
CONCURRENTLY`, `VACUUM`, …) is watched from a second session: a third holds SHARE UPDATE
EXCLUSIVE on every table — the weakest mode that makes every such statement wait where it
takes its table lock, while `pg_locks` shows the mode it asks for — then lets go, and the
statement runs on while its further locks are sampled.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import psycopg
from psycopg import sql

from queueguard.pg.connect import connect
from queueguard.pg.sqlfiles import queries

Q = queries("queueguard.engine.plan", "observe.sql")
APPLICATION_NAME = "queueguard-plan-watch"
POLL_S = 0.001
#: an outside statement that never waits on the holder is judged by what was sampled
WATCH_LIMIT_S = 600.0


@dataclass(frozen=True)
class Relation:
    oid: int
    name: str
    kind: str  # pg_class.relkind
    filenode: int | None
    table: int | None  # an index's table


@dataclass(frozen=True)
class State:
    """What a session sees of the schema at one moment."""

    locks: frozenset[tuple[int, str]]
    relations: dict[int, Relation]
    scans: dict[int, int]
    #: the server's WAL insert position (a statement inside a transaction cannot have its
    #: session's own WAL read: its counters are published at the transaction's end)
    wal: int | None = None


@dataclass
class Observation:
    """What one statement did."""

    sql: str
    transactional: bool
    seconds: float
    #: (relation, pg_locks mode) on relations that existed before the statement
    locks: list[tuple[str, str]] = field(default_factory=list)
    created: list[str] = field(default_factory=list)
    rewrites: list[str] = field(default_factory=list)
    scans: list[str] = field(default_factory=list)
    error: str | None = None
    #: WAL it wrote on the sample (`wal_own`: its session's alone, else the server's insert
    #: position around it: every session's); None: not measured
    wal_bytes: int | None = None
    wal_own: bool = False
    #: the new relation files it left on the sample (what it rewrote and created)
    disk_bytes: int | None = None
    #: where it came from, when the format says (Django: the operation, "deferred SQL")
    origin: str | None = None


def relations(conn: psycopg.Connection[Any]) -> dict[int, Relation]:
    rows = conn.execute(Q["relations"]).fetchall()
    return {r[0]: Relation(r[0], r[1], r[2], r[3], r[4]) for r in rows}


#: what `state` reads, in its order
STATE_QUERIES = ("own_locks", "xact_scans", "relations", "server_wal")


def state(conn: psycopg.Connection[Any]) -> State:
    """The session's locks, relations and scans, read in one round trip (a pipeline: the
    queries are sent together; it is read around every statement a plan watches)."""
    with conn.pipeline():
        locks_c, scans_c, rels_c, wal_c = (conn.execute(Q[q]) for q in STATE_QUERIES)
    locks = frozenset((r[0], r[1]) for r in locks_c.fetchall())
    scans = {r[0]: r[1] for r in scans_c.fetchall()}
    rels = {r[0]: Relation(r[0], r[1], r[2], r[3], r[4]) for r in rels_c.fetchall()}
    wal = wal_c.fetchone()
    return State(locks, rels, scans, int(wal[0]) if wal and wal[0] is not None else None)


#: pg_locks' mode names, weakest first
ORDER = (
    "AccessShareLock",
    "RowShareLock",
    "RowExclusiveLock",
    "ShareUpdateExclusiveLock",
    "ShareLock",
    "ShareRowExclusiveLock",
    "ExclusiveLock",
    "AccessExclusiveLock",
)


def _named(oids: Iterable[tuple[int, str]], rels: dict[int, Relation]) -> list[tuple[str, str]]:
    """(name, mode) for the user relations among `oids` (system catalogs have no entry): the
    strongest mode per relation, and an index only where it is locked harder than its table
    (an index scan's ACCESS SHARE under its table's lock says nothing more)."""
    strongest: dict[int, str] = {}
    for oid, mode in oids:
        known = oid in rels and mode in ORDER
        if known and (oid not in strongest or ORDER.index(mode) > ORDER.index(strongest[oid])):
            strongest[oid] = mode
    shown = []
    for oid, mode in strongest.items():
        table = rels[oid].table
        if table in strongest and ORDER.index(mode) <= ORDER.index(strongest[table]):
            continue
        shown.append((rels[oid].name, mode))
    return sorted(shown)


def diff(sql_text: str, before: State, after: State, seconds: float) -> Observation:
    """What changed between two states of one transaction (pure)."""
    old = before.relations
    added = after.locks - before.locks
    rewritten = {
        oid
        for oid, rel in old.items()
        if oid in after.relations and after.relations[oid].filenode != rel.filenode
    }
    tables_rewritten = {oid for oid in rewritten if old[oid].kind in "rmtp"}
    # A table's rewrite rebuilds its indexes: name the indexes only when their table kept
    # its file (REINDEX, an ALTER that rebuilds one index).
    rewrites = [
        old[oid].name
        for oid in sorted(rewritten)
        if old[oid].kind in "rmtp" or old[oid].table not in tables_rewritten
    ]
    scanned = [
        old[oid].name
        for oid, count in sorted(after.scans.items())
        if count > before.scans.get(oid, 0) and oid in old and oid not in rewritten
    ]
    created = sorted(r.name for oid, r in after.relations.items() if oid not in old)
    return Observation(
        sql=sql_text,
        transactional=True,
        seconds=seconds,
        locks=_named(added, old),
        created=created,
        rewrites=sorted(rewrites),
        scans=sorted(set(scanned)),
        wal_bytes=(
            max(0, after.wal - before.wal)
            if after.wal is not None and before.wal is not None
            else None
        ),
    )


class OutsideWatch:
    """A statement about to run outside a transaction on the backend `pid`: hold SHARE UPDATE
    EXCLUSIVE on every table from a second session, sample the statement's locks from a third
    until it waits on the holder (or ends), then let go."""

    def __init__(self, dsn: str, pid: int, rels: dict[int, Relation]) -> None:
        self.pid = pid
        self.rels = rels
        self.seen: set[tuple[int, str]] = set()
        self.waited_s = 0.0
        self._done = threading.Event()
        self._holder = connect(dsn, application_name=APPLICATION_NAME)
        tables = [r.name for r in rels.values() if r.kind in "rpm"]
        if tables:
            names = sql.SQL(", ").join(sql.SQL(t) for t in tables)  # regclass text: quoted
            self._holder.execute(
                sql.SQL("LOCK TABLE {} IN SHARE UPDATE EXCLUSIVE MODE").format(names)
            )
        self._watcher = connect(dsn, application_name=APPLICATION_NAME, autocommit=True)
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        released = False
        started = time.monotonic()
        waiting_since: float | None = None
        try:
            while not self._done.is_set() and time.monotonic() - started < WATCH_LIMIT_S:
                self._sample()
                if not released and self._waiting():
                    waiting_since = waiting_since or time.monotonic()
                    # what it holds and awaits now is what it needs: read it once more (the
                    # sample above may predate the wait), then let it have it
                    self._sample()
                    self._release()
                    released = True
                    self.waited_s = time.monotonic() - waiting_since
                time.sleep(POLL_S)
        finally:
            if not released:
                self._release()

    def _sample(self) -> None:
        rows = self._watcher.execute(Q["pid_locks"], {"pid": self.pid}).fetchall()
        self.seen |= {(r[0], r[1]) for r in rows}

    def _waiting(self) -> bool:
        row = self._watcher.execute(Q["pid_waiting"], {"pid": self.pid}).fetchone()
        return bool(row and row[0])

    def _release(self) -> None:
        with contextlib.suppress(psycopg.Error):  # its session is gone: nothing is held
            self._holder.rollback()

    def finish(self) -> list[tuple[str, str]]:
        self._done.set()
        self._thread.join()
        self._holder.close()
        self._watcher.close()
        return _named(self.seen, self.rels)


def outside(conn: psycopg.Connection[Any], dsn: str, sql_text: str) -> Observation:
    """Run `sql_text` on `conn` (autocommit) under an OutsideWatch; errors propagate after
    the watch is over."""
    before = relations(conn)
    scans_before = _flushed_scans(conn)
    watch = OutsideWatch(dsn, conn.info.backend_pid, before)
    started = time.monotonic()
    error: BaseException | None = None
    try:
        conn.execute(sql_text)
    except psycopg.Error as exc:
        error = exc
    seconds = time.monotonic() - started
    locks = watch.finish()
    if error is not None:
        raise error
    after = relations(conn)
    rewritten = [
        r.name
        for oid, r in before.items()
        if oid in after and after[oid].filenode != r.filenode and r.kind in "rmtpi"
    ]
    created = [r.name for oid, r in after.items() if oid not in before]
    scans_after = _flushed_scans(conn)
    scanned = [
        before[oid].name
        for oid, count in scans_after.items()
        if oid in before and count > scans_before.get(oid, 0) and before[oid].name not in rewritten
    ]
    return Observation(
        sql=sql_text,
        transactional=False,
        seconds=max(0.0, seconds - watch.waited_s),
        locks=locks,
        created=sorted(created),
        rewrites=sorted(rewritten),
        scans=sorted(scanned),
    )


def _flushed_scans(conn: psycopg.Connection[Any]) -> dict[int, int]:
    """Per table, sequential scans plus heap blocks read (VACUUM reads without counting a
    scan), as the statistics system has them once this backend's own are flushed (an
    autocommit connection: each query ends its transaction)."""
    conn.execute(Q["flush_stats"])
    conn.execute("SELECT 1")  # idle in between: the forced flush happens here
    return {r[0]: r[1] for r in conn.execute(Q["table_scans"]).fetchall()}


class WalMeter:
    """The WAL a session writes, statement by statement, read between two transactions: on
    PostgreSQL 18 its own (`pg_stat_get_backend_wal`, its statistics flushed first), before
    that the server's insert position, which counts every session ("upper bound,
    server-wide")."""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self.own = conn.info.server_version >= 180000

    def mark(self, conn: psycopg.Connection[Any]) -> int:
        if self.own:
            conn.execute(Q["wal_flush"])
            conn.commit()
            row = conn.execute(Q["backend_wal"]).fetchone()
        else:
            row = conn.execute(Q["server_wal"]).fetchone()
        if not conn.autocommit:
            conn.commit()
        return int(row[0]) if row and row[0] is not None else 0


def new_files(conn: psycopg.Connection[Any], names: list[str]) -> int:
    """The bytes of the relations named (a statement's rewrites and creations)."""
    if not names:
        return 0
    row = conn.execute(Q["relation_bytes"], {"names": names}).fetchone()
    return int(row[0]) if row else 0
