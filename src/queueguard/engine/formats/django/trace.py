"""Watching a Django project's migrations: Django's real `migrate` runs on the scratch copy in
the project's interpreter (`sets.django_process`), and each statement of the migration's own
connection waits while queueguard reads that session around it, through the runner (the
runner runs the queries on its connection, in the statement's transaction): the same reads,
and the same `Observation`s, as for an Alembic revision (`plan.watch`).

What the capture cannot see is named, not guessed: a statement sent on another connection
(a raw driver cursor, another thread, another alias) or a catalog change between a
migration's start and end that no captured statement explains (read from outside before and
after it: work sent to a job queue, another process) makes the migration **opaque**: priced
as observed, never rewritten, named in the bill.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from queueguard.engine.plan.observe import STATE_QUERIES, State
from queueguard.engine.plan.observe import Q as Q_PLAN
from queueguard.engine.plan.watch import (
    Traced,
    Watcher,
    indexes_now,
    is_introspection,
    sizes_now,
)
from queueguard.errors import MigrationError
from queueguard.pg.connect import connection
from queueguard.pg.sqlfiles import queries
from queueguard.sets import MigrationSet, Revision
from queueguard.sets import django as django_format
from queueguard.sets.django_process import Runner

Q = queries("queueguard.engine.formats.django", "trace.sql")
_QUOTED = re.compile(r'"((?:[^"]|"")+)"')
_WORD = re.compile(r"[a-z_][a-z0-9_$]*")


class _Rows:
    def __init__(self, rows: list[list[Any]] | None = None) -> None:
        self.rows = [tuple(r) for r in rows or []]

    def fetchall(self) -> list[tuple[Any, ...]]:
        return self.rows

    def fetchone(self) -> tuple[Any, ...] | None:
        return self.rows[0] if self.rows else None


class Remote:
    """The runner's connection as `observe` reads a session: each query is run there, in
    the transaction the statement about to run (or just run) is in."""

    def __init__(self, runner: Runner, pid: int, autocommit: bool) -> None:
        self.runner = runner
        self.autocommit = autocommit
        self.info = SimpleNamespace(backend_pid=pid)
        self._batch: list[tuple[dict[str, Any], _Rows]] | None = None
        #: the statement's own time, as the runner measured it
        self.statement_seconds: float | None = None
        #: the session read right after the statement, sent back with it: what `state`
        #: reads then is answered from these, with no trip of its own
        self.after: dict[str, list[list[Any]]] = {}

    def go(self) -> None:
        """Run the statement, and read the session right after it in the same trip (in a
        transaction: one in autocommit is watched from outside, `Watcher.run`)."""
        after = [] if self.autocommit else [Q_PLAN[q] for q in STATE_QUERIES]
        self.runner.send(op="go", then=[{"sql": sql, "params": None} for sql in after])
        ran = self.runner.receive()
        self.statement_seconds = ran.get("seconds")
        if ran.get("error"):
            raise _StatementFailed(ran["error"])
        if ran.get("read_error"):
            raise MigrationError(f"reading the Django session: {ran['read_error']}")
        self.after = dict(zip(after, ran["results"], strict=True))

    def execute(self, sql: str, params: Mapping[str, Any] | None = None) -> _Rows:
        query = {"sql": sql, "params": dict(params) if params else None}
        if self._batch is not None:  # in a pipeline: answered when it ends
            self._batch.append((query, _Rows()))
            return self._batch[-1][1]
        self.runner.send(op="query", **query)
        return _Rows(self._answer()["rows"])

    def _answer(self) -> dict[str, Any]:
        answer = self.runner.receive()
        if answer.get("error"):
            raise MigrationError(f"reading the Django session: {answer['error']}")
        return answer

    @contextmanager
    def pipeline(self) -> Iterator[None]:
        """The queries sent in it go to the runner together, in one round trip, as
        psycopg's pipeline sends them to the server (their rows are read after it)."""
        self._batch = []
        try:
            yield
            batch, self._batch = self._batch, None
            if batch and all(query["sql"] in self.after for query, _ in batch):
                for query, rows in batch:  # read with the statement (`go`)
                    rows.rows = [tuple(r) for r in self.after.pop(query["sql"])]
            elif batch:
                self.runner.send(op="queries", queries=[query for query, _ in batch])
                for (_, rows), found in zip(batch, self._answer()["results"], strict=True):
                    rows.rows = [tuple(r) for r in found]
        finally:
            self._batch = None


@dataclass
class Migration:
    """What one migration did beyond its watched statements."""

    id: str
    #: every statement captured, in order: {sql, origin, transaction, via, thread, alias}
    statements: list[dict[str, Any]] = field(default_factory=list)
    #: why it is opaque (empty: its statements are all known)
    opaque: list[str] = field(default_factory=list)
    seconds: float = 0.0
    #: its Python steps as they ran ("N: Kind"; a pre_migrate handler may add some)
    python: list[str] = field(default_factory=list)


@dataclass
class Capture:
    traced: list[Traced] = field(default_factory=list)
    migrations: dict[str, Migration] = field(default_factory=dict)
    #: post_migrate handlers' statements (content types, permissions, the apps' own)
    post_migrate: list[dict[str, Any]] = field(default_factory=list)


def catalog(conn: Any) -> set[tuple[str, str, str]]:
    """The catalog's objects, read on an autocommit connection (no snapshot held)."""
    return {(r[0], r[1], r[2]) for r in conn.execute(Q["catalog_objects"]).fetchall()}


def unexplained(
    before: set[tuple[str, str, str]], after: set[tuple[str, str, str]], sqls: Sequence[str]
) -> list[str]:
    """The objects whose catalog entry changed and that no captured statement names: by the
    object's name, its table's, or a name PostgreSQL and Django derive from one the
    statements name (`<table>_pkey`, `<table>_id_seq`, `<table>_<column>_<hash>`): pure."""
    text = " ".join(s.lower() for s in sqls)
    named = {m.lower() for m in _QUOTED.findall(text)} | set(_WORD.findall(text))

    def explained(name: str) -> bool:
        lowered = name.lower()
        return lowered in named or any(lowered.startswith(f"{n}_") for n in named)

    changed = {(name, table) for name, table, _ in before ^ after}
    return sorted(
        name for name, table in changed if not explained(name) and not (table and explained(table))
    )


_SAVEPOINT = re.compile(r"^\s*(SAVEPOINT|RELEASE|ROLLBACK\s+TO)\b", re.I)
_CONCURRENT = re.compile(
    r"^\s*CREATE\s+(?:UNIQUE\s+)?INDEX\s+CONCURRENTLY\s+(IF\s+NOT\s+EXISTS\s+)?(\S+)", re.I
)


def notes(revision: Revision, migration: Migration) -> list[str]:
    """What the bill says of one migration beyond its statements' lines (pure)."""
    found = [
        f"opaque: {reason}; priced as observed, never rewritten" for reason in migration.opaque
    ]
    if not revision.native.get(django_format.ATOMIC, True):
        found.append(
            "atomic = False: each statement commits on its own; a failure halfway leaves the "
            "earlier statements applied and the migration unrecorded in django_migrations "
            "(upgrade retries only the statement that timed out, in place)"
        )
    ran: dict[str, int] = {}
    for statement in migration.statements:
        origin, sql = str(statement.get("origin") or ""), str(statement["sql"])
        ran[origin] = ran.get(origin, 0) + 1
        concurrent = _CONCURRENT.match(sql)
        if concurrent:
            retried = (
                "a retry succeeds and keeps it invalid"
                if concurrent.group(1)
                else ("a retry fails on it")
            )
            found.append(
                f"CREATE INDEX CONCURRENTLY {concurrent.group(2)} is not retry-safe as written: "
                f"a failed or cancelled build leaves an INVALID index, and {retried}; upgrade "
                "drops an INVALID index of that name before building it again"
            )
    for n, op in enumerate(revision.native.get(django_format.OPERATIONS, ()), start=1):
        if op.get("python"):
            count = ran.get(f"{n}: {op.get('kind')}", 0)
            found.append(
                f"{op.get('kind')} (operation {n}): a Python step, "
                f"data-dependent: {count} statement(s) on the sample, priced as its rows scale"
            )
    return found


def as_sql(revision: Revision, migration: Migration, traced: Traced) -> tuple[str, ...] | str:
    """The migration as the SQL its migrate sent, one statement for each line of the bill
    (queries that changed nothing left out), when that SQL is all it did; else why not:
    opaque, a Python step (its statements depend on the rows it reads), or a statement that
    is not on the bill (a `SET`: its effect on the session would not be carried). Pure."""
    if migration.opaque:
        return f"it is opaque ({migration.opaque[0]})"
    declared = [
        f"{n}: {op.get('kind')}"
        for n, op in enumerate(revision.native.get(django_format.OPERATIONS, ()), start=1)
        if op.get("python")
    ]
    steps = [*declared, *migration.python]
    if steps:
        n, _, kind = steps[0].partition(": ")
        return (
            f"operation {n} is {kind}, a Python step: its statements depend on what it reads, "
            "and queueguard does not rewrite Python"
        )
    lines = [seen.sql for seen in traced.seen]
    at = 0
    for statement in migration.statements:
        sql = str(statement["sql"])
        if statement.get("origin") == "bookkeeping":
            continue
        if _SAVEPOINT.match(sql):  # an atomic block of Django's own inside the migration
            return f"it runs `{_short(sql)}`: an atomic block of its own, which its SQL cannot"
        if at < len(lines) and lines[at] == sql:
            at += 1
        elif not is_introspection(sql):
            return f"its statement `{_short(sql)}` is not one the bill prices"
    if at != len(lines):
        return "the statements captured are not those the bill prices"
    return tuple(lines)


def traced(mset: MigrationSet, dsn: str, revisions: Sequence[Revision]) -> list[Traced]:
    return capture(mset, dsn, revisions).traced


def capture(mset: MigrationSet, dsn: str, revisions: Sequence[Revision]) -> Capture:
    """Run the pending `revisions` on the scratch database at `dsn` through Django's migrate,
    each statement watched; what each migration did."""
    found = Capture()
    if not revisions:
        return found
    watcher = Watcher(dsn, frozenset())
    watcher.wanted = lambda sql: True  # type: ignore[method-assign]
    by_id = {r.id: r for r in mset.revisions}
    project = django_format._project(mset)
    current: Migration | None = None
    started = 0.0
    # the migration's session as read after its last watched statement, while nothing else
    # has been sent since: the next statement's "before" (half the reads of a migration)
    known: tuple[int, State] | None = None
    # one reader for the catalog and the sizes between migrations; one migration's "after"
    # is the next one's "before" (nothing runs between them in Django's executor)
    graph = django_format.graph_of(mset)
    with connection(dsn, autocommit=True) as reader, graph.borrow(dsn) as runner:
        sizes, indexes = sizes_now(reader), indexes_now(reader)
        before = catalog(reader)
        targets = django_format.migrate_targets(mset, revisions)
        runner.send(op="migrate", targets=targets, watch=True)
        for event in runner.events():
            kind = event["ev"]
            if kind != "watch":
                known = None
            if kind == "start":
                runner.running = event["id"]
                current = found.migrations[event["id"]] = Migration(event["id"])
                current.python = list(event.get("python") or [])
                found.traced.append(Traced(by_id[event["id"]], [], sizes, dict(indexes)))
                watcher.seen = found.traced[-1].seen
                started = time.perf_counter()
                runner.send(op="next")
            elif kind == "watch":
                assert current is not None
                current.statements.append(_kept(event))
                pid = int(event["pid"])
                session = known[1] if known and known[0] == pid else None
                _watch(runner, watcher, event, session)
                known = (pid, watcher.after) if watcher.after is not None else None
            elif kind == "stmt":
                _other(found, current, event, project.alias)
            elif kind == "applied":
                assert current is not None
                current.seconds = time.perf_counter() - started
                sqls = [s["sql"] for s in current.statements]
                after = catalog(reader)
                for name in unexplained(before, after, sqls):
                    current.opaque.append(f"{name} changed, and no captured statement names it")
                found.traced[-1].notes = notes(by_id[current.id], current)
                found.traced[-1].captured = as_sql(by_id[current.id], current, found.traced[-1])
                before, sizes, now = after, sizes_now(reader), indexes_now(reader)
                found.traced[-1].indexes = {**now, **found.traced[-1].indexes}
                indexes = now
                current, runner.running = None, None
                runner.send(op="next")
            elif kind == "done":
                break
            elif kind == "failed":
                raise _failed(event, found)
    return found


def _kept(event: dict[str, Any]) -> dict[str, Any]:
    keys = ("sql", "origin", "transaction", "via", "thread", "alias")
    return {k: event.get(k) for k in keys}


def _watch(runner: Runner, watcher: Watcher, event: dict[str, Any], before: State | None) -> None:
    """One statement of the migration's connection: read around it, through the runner
    (`before`: the session as it is now, known from the previous statement)."""
    remote = Remote(runner, int(event["pid"]), bool(event["autocommit"]))
    try:
        watcher.run(remote, event["sql"], remote.go, before)  # type: ignore[arg-type]
        if watcher.seen and watcher.seen[-1].sql == event["sql"]:
            watcher.seen[-1].origin = event.get("origin")
    except _StatementFailed:
        pass  # Django raises it in the runner: the run ends with a "failed" event
    finally:
        runner.send(op="next")


class _StatementFailed(Exception):
    pass


def _other(found: Capture, current: Migration | None, event: dict[str, Any], alias: str) -> None:
    """A statement that was not watched: Django's bookkeeping, a post_migrate handler's, or
    one the migration sent some other way (which makes it opaque)."""
    if event.get("origin") == "post_migrate":
        found.post_migrate.append(_kept(event))
        return
    if current is None:
        return
    current.statements.append(_kept(event))
    if event.get("origin") == "bookkeeping":
        return
    if event.get("via") == "driver":
        current.opaque.append(f"a statement through a raw driver cursor: {_short(event['sql'])}")
    elif event.get("thread") == "other":
        current.opaque.append(f"a statement from another thread: {_short(event['sql'])}")
    elif event.get("alias") not in (None, alias):
        current.opaque.append(f"a statement on alias {event.get('alias')}: {_short(event['sql'])}")


def _short(sql: str) -> str:
    return " ".join(str(sql).split())[:120]


def _failed(event: dict[str, Any], found: Capture) -> MigrationError:
    migration = event.get("migration")
    what = f"migration {migration}" if migration else "Django's migrate"
    reasons = found.migrations[migration].opaque if migration in found.migrations else []
    note = (
        "; it is opaque: " + "; ".join(reasons)
        if reasons
        else ("; a statement on another alias fails: queueguard points every alias but the "
              "one migrated at an address that refuses connections")
        if "queueguard-refused" in str(event.get("error"))
        else ""
    )  # fmt: skip
    error = MigrationError(f"{what} failed on a scratch database: {event.get('error')}{note}")
    error.sqlstate = event.get("sqlstate")
    return error


def captured_sql(mset: MigrationSet, admin_dsn: str | None = None) -> dict[str, list[str]]:
    """Each migration's statements as Django's migrate sends them to an empty database (a
    scratch database on `admin_dsn`'s server, default queueguard's own): what `lint` reads.
    Django's bookkeeping and the driver's and ORM's queries that change nothing are left
    out."""
    from queueguard.pg import scratch

    with scratch.ScratchDatabases(admin_dsn or scratch.server_dsn(), prefix="qglint") as dbs:
        found = capture(mset, dbs.create(), mset.pending(None))
    return {
        mid: [
            str(s["sql"])
            for s in m.statements
            if s["origin"] != "bookkeeping" and not is_introspection(str(s["sql"]))
        ]
        for mid, m in found.migrations.items()
    }
