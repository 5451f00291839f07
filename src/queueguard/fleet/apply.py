"""One target of a fleet, read or upgraded exactly as `queueguard upgrade` does it for one
database: the same runner, lock timeouts and ladder, runner lock, native bookkeeping.

What the fleet adds around it:
- a schema target's sessions get `search_path` = that schema alone (a startup option),
  checked on the server (`current_schema()`) before the first statement: a pooler that
  drops startup options makes the target fail, it never runs in `public`;
- the runner lock keyed per target (a schema target gets its own key, a database keeps
  the key every `upgrade` takes);
- the target's connections kept, so its statement can be cancelled when its lease is lost
  or a signal's grace has run out;
- a SQL set asked between revisions whether to stop, so a target in flight can stop after
  the revision it is in (a stop, a signal) and a rerun goes on from there."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

import psycopg

from queueguard.engine.apply.report import UpgradeReport
from queueguard.engine.apply.runner_lock import RUNNER_KEY
from queueguard.engine.apply.session import APPLICATION_NAME, Limits
from queueguard.errors import ConnectionFailed
from queueguard.fleet.alembic_worker import Worker
from queueguard.fleet.targets import Target
from queueguard.pg.connect import ON_CONNECT, connect, reason
from queueguard.pg.dsn import redact, with_search_path
from queueguard.pg.sqlfiles import queries
from queueguard.sets import MigrationSet

Q = queries("queueguard.fleet", "fleet.sql")
#: Alembic's `context` is one per process: Alembic sets (queueguard's own among them) run
#: in worker processes (`alembic_worker`), or one at a time in the runner (`--online`)
ONE_AT_A_TIME = ("queueguard", "alembic")
_ALEMBIC = threading.Lock()


class Online(Protocol):
    """`fleet upgrade --online`'s forms for a target (`fleet.online.Online`)."""

    mset: MigrationSet

    def upgrade(
        self, target: Target, dsn: str, limits: Limits, stop: Callable[[], bool]
    ) -> UpgradeReport: ...


class SchemaNotSet(ConnectionFailed):
    """A schema target's session is not in its schema (a pooler dropped the startup option,
    or the schema does not exist): the target fails before any statement."""


def quoted(schema: str) -> str:
    """A schema's name as an identifier (search_path's value)."""
    return '"' + schema.replace('"', '""') + '"'


def session_dsn(target: Target) -> str:
    """The DSN the target's sessions use: a schema target's carries `search_path`."""
    return target.dsn if target.schema is None else with_search_path(target.dsn, target.schema)


def runner_key(target: Target) -> str:
    return APPLICATION_NAME if target.schema is None else f"{APPLICATION_NAME}:{target.schema}"


@dataclass
class Flight:
    """A target in flight on this runner."""

    target: Target
    connections: list[psycopg.Connection[Any]] = field(default_factory=list)
    #: finish the revision in flight, then stop (a stop of the run, a signal)
    stop_between: threading.Event = field(default_factory=threading.Event)
    #: the lease is lost: cancel, record nothing more
    lost: threading.Event = field(default_factory=threading.Event)
    #: its statement is to be cancelled (what an Alembic worker process watches)
    cancelled: threading.Event = field(default_factory=threading.Event)

    def stopping(self) -> bool:
        """Whether to stop before the next revision: the run stopped, a signal, a lost
        lease."""
        return self.stop_between.is_set() or self.lost.is_set()

    def cancel(self) -> None:
        self.cancelled.set()
        for conn in list(self.connections):
            with contextlib.suppress(Exception):  # a closed connection has nothing to cancel
                conn.cancel()


@contextmanager
def _session(flight: Flight) -> Iterator[None]:
    """Every connection opened in here to the target is kept for cancelling, and a schema
    target's is checked to be in its schema before it is used."""
    target = flight.target
    dsn = session_dsn(target)

    def opened(used: str, conn: psycopg.Connection[Any]) -> None:
        if used != dsn:
            return
        flight.connections.append(conn)
        if target.schema is not None:
            schema_of(conn, target)

    token = ON_CONNECT.set(opened)
    key = RUNNER_KEY.set(runner_key(target))
    try:
        yield
    finally:
        ON_CONNECT.reset(token)
        RUNNER_KEY.reset(key)
        flight.connections.clear()


def schema_of(conn: psycopg.Connection[Any], target: Target) -> None:
    row = conn.execute(Q["current_schema"]).fetchone()
    conn.rollback()
    found = row[0] if row else None
    if found != target.schema:
        raise SchemaNotSet(
            f"{target.name}: the session's schema is {found or 'none'}, not {target.schema} "
            "(the schema is missing, or a pooler dropped the search_path startup option): "
            "nothing was run"
        )


def current(
    mset: MigrationSet, target: Target, conn: psycopg.Connection[Any] | None = None
) -> str | None:
    """Where the target is, by the format's own ledger (read only)."""
    from queueguard.engine.apply.bookkeeping import current as set_current

    own = conn is None
    if conn is None:
        conn = connect(session_dsn(target), application_name="queueguard-fleet")
    try:
        if target.schema is not None:
            schema_of(conn, target)
        if mset.format == "queueguard":
            from queueguard.sets import alembic_version_table

            found = alembic_version_table.read(conn, mset.version_table or "queueguard_version")
        elif mset.format == "django":  # read by Django's recorder, in the project's runner
            from queueguard.sets import django

            found = django.current(mset, session_dsn(target))
        else:
            found = set_current(mset, conn)
        conn.rollback()
        return found
    finally:
        if own:
            conn.close()


@dataclass
class Outcome:
    before: str | None
    after: str | None
    applied: list[str]
    lock_waits: int = 0
    #: stopped after a revision (a stop of the run, a signal): not at the target revision
    stopped: bool = False


def upgrade(
    mset: MigrationSet,
    flight: Flight,
    to: str | None,
    limits: Limits,
    online: Online | None = None,
    worker: Worker | None = None,
) -> Outcome:
    """The target brought to `to` as `queueguard upgrade` (with `online`: `upgrade
    --online`) brings one database; an Alembic set (not online) in `worker`, a process of
    its own."""
    target = flight.target
    dsn = session_dsn(target)
    with _session(flight):
        if flight.stopping():
            at = current(mset, target)
            return Outcome(at, at, [], stopped=True)
        if online is not None:
            alembic = mset.format in ONE_AT_A_TIME
            with _ALEMBIC if alembic else contextlib.nullcontext():
                return _online(online, dsn, to, limits, flight)
        if mset.format in ONE_AT_A_TIME:
            if worker is None:
                raise ValueError("an Alembic set runs in a worker process")
            before = current(mset, target)
            done = worker.upgrade(dsn, to, limits, flight.cancelled, runner_key(target))
            return Outcome(before, done["after"], done["applied"], done["lock_waits"])
        return _stepwise(mset, dsn, to, limits, flight)


def _online(online: Online, dsn: str, to: str | None, limits: Limits, flight: Flight) -> Outcome:
    report = online.upgrade(flight.target, dsn, limits, flight.stopping)
    stopped = not online.mset.at_head(report.after, to) and flight.stopping()
    return Outcome(report.before, report.after, list(report.applied), report.lock_waits, stopped)


def _stepwise(
    mset: MigrationSet, dsn: str, to: str | None, limits: Limits, flight: Flight
) -> Outcome:
    """A SQL set on one connection, asked before each revision whether to stop there."""
    from queueguard.engine.apply.runner import upgrade as upgrade_set

    report = upgrade_set(
        mset, dsn, to=to, limits=limits, stop=flight.stopping, cancelled=flight.cancelled
    )
    stopped = not mset.at_head(report.after, to) and flight.stopping()
    return Outcome(report.before, report.after, list(report.applied), report.lock_waits, stopped)


def refusal(mset: MigrationSet, target: Target) -> str | None:
    """Why this set cannot run on this target at all (checked before any claim)."""
    if target.schema is None:
        return None
    if mset.format == "queueguard":
        return (
            f"{target.name}: queueguard's own set (its runtime, host fence, online phases) "
            "needs a database per tenant, not a schema"
        )
    return None


def database_alone(mset: MigrationSet) -> bool:
    """Whether schema targets of one database must take turns: a statement that runs
    outside a transaction (a concurrent build waits for every older transaction of its
    database, another schema target's revision included) or that names a relation outside
    the target's own schema (a foreign key to a shared table) — or statements not known
    before they run (a Python revision)."""
    from pglast import ast

    from queueguard.engine.online.choose import nodes, parse_one

    for rev in mset.revisions:
        if rev.statements is None:
            return True
        for statement in rev.statements:
            try:
                tree = parse_one(statement)
            except Exception:  # what cannot be parsed is not known to be safe
                return True
            for node in nodes(tree):
                if isinstance(node, ast.RangeVar) and node.schemaname:
                    return True
                if isinstance(node, ast.IndexStmt | ast.DropStmt) and node.concurrent:
                    return True
                if isinstance(node, ast.VacuumStmt | ast.ReindexStmt):
                    return True
    return False


def failure(exc: BaseException) -> str:
    """The first line of a target's error, passwords redacted."""
    text = reason(exc) if isinstance(exc, psycopg.Error) else redact(str(exc))
    line = text.strip().splitlines()[0] if text.strip() else type(exc).__name__
    return line[:500]
