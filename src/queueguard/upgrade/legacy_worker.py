"""Legacy workers: released v0.2 and v0.3 hosts, replayed from their statement catalogs.

`fixtures/legacy_workers/v0.2.sql` and `v0.3.sql` hold, as named statements, exactly what
those host versions issued. The tiny runner here executes them the way the old host did
(transactions, the v0.3 handshake and its refusal rule, the range-conflict report) through
**pg8000**, a driver independent of the runtime's psycopg, so the fence it proves cannot
depend on our own client code. `driver="psycopg"` runs the same statements through psycopg
(the fence must hold under both drivers).

- v0.3 sets `application_name` to `queueguard/3 host=<id>`; it checks `runtime_protocol`
  at startup and in every load's transaction (exactly one row, 3 within [min, max]), and
  unloads a queue on a range conflict.
- v0.2 sets no `application_name` and has no handshake; its spool is the delivery-id table.

`python -m queueguard.upgrade.legacy_worker --worker v0.3 --dsn DSN` starts a legacy host the way an
operator would and prints one line: accepted, or the error that stops it.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import sys
import time
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal, Protocol, Self

from queueguard.errors import (
    ConnectionFailed,
    ProtocolMismatch,
    QueueguardError,
    QueueUnloaded,
    StaleRangeError,
    UsageError,
    UserDataConflict,
)
from queueguard.pg.dsn import params, redact
from queueguard.pg.sqlfiles import parse_named
from queueguard.resources import fixtures_dir

WORKERS = ("v0.2", "v0.3")
Driver = Literal["pg8000", "psycopg"]
DRIVERS: tuple[Driver, ...] = ("pg8000", "psycopg")
Row = tuple[Any, ...]

_HEADER_LINE = re.compile(r"^-- ([a-z_]+): (.*?)\s*$")
_REQUIRES = re.compile(r"^-- requires: (.+?)\s*$", re.MULTILINE)
_PLACEHOLDER = re.compile(r"(?<![:\w]):([A-Za-z_]\w*)")
#: SQLSTATEs of a statement that does not fit the schema (undefined table / column).
UNRESOLVED_SQLSTATES = frozenset({"42P01", "42703"})


# catalogs ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Statement:
    name: str
    sql: str
    #: statements the host ran first in the same transaction (`-- requires: handshake`)
    requires: tuple[str, ...] = ()

    @property
    def placeholders(self) -> frozenset[str]:
        return frozenset(_PLACEHOLDER.findall(_strip_comments(self.sql)))


@dataclass(frozen=True)
class StatementCatalog:
    worker: str  # "v0.3"
    protocol: int | None  # None: before the runtime_protocol handshake existed
    revision: str  # the schema revision this host version ran on
    statements: dict[str, Statement]

    def __getitem__(self, name: str) -> Statement:
        return self.statements[name]


def _strip_comments(sql: str) -> str:
    return "\n".join(line for line in sql.splitlines() if not line.lstrip().startswith("--"))


def catalog_dir() -> Path:
    return fixtures_dir() / "legacy_workers"


def parse_catalog(text: str) -> StatementCatalog:
    """A catalog file: `-- key: value` header lines, then `-- name:` statements."""
    header: dict[str, str] = {}
    for line in text.splitlines():
        if line.startswith("-- name:"):
            break
        match = _HEADER_LINE.match(line)
        if match:
            header[match.group(1)] = match.group(2)
    statements = {}
    for name, body in parse_named(text).items():
        requires = tuple(
            r.strip() for m in _REQUIRES.findall(body) for r in m.split(",") if r.strip()
        )
        statements[name] = Statement(name, body, requires)
    for statement in statements.values():
        for required in statement.requires:
            if required not in statements:
                raise ValueError(f"{statement.name} requires unknown statement {required!r}")
    protocol = header.get("protocol", "none")
    return StatementCatalog(
        worker=header["worker"],
        protocol=None if protocol == "none" else int(protocol),
        revision=header["revision"],
        statements=statements,
    )


def load_catalog(worker: str) -> StatementCatalog:
    if worker not in WORKERS:
        raise UsageError(f"unknown legacy worker {worker!r} (have: {', '.join(WORKERS)})")
    return parse_catalog((catalog_dir() / f"{worker}.sql").read_text(encoding="utf-8"))


def all_catalogs() -> list[StatementCatalog]:
    return [load_catalog(w) for w in WORKERS]


# queues (the released key encoding, reimplemented: the legacy host had its own) ----------
def _quote(text: str) -> str:
    return urllib.parse.quote(text, safe="")


@dataclass(frozen=True)
class LegacyQueue:
    namespace: str
    task_queue: str
    task_type: str = "workflow"
    partition: int = 0
    version: str = ""

    @property
    def key(self) -> str:
        base = f"{_quote(self.namespace)}/{_quote(self.task_queue)}/{self.task_type}/"
        base += str(self.partition)
        return base + (f"@{_quote(self.version)}" if self.version else "")

    def params(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "namespace": self.namespace,
            "task_queue": self.task_queue,
            "task_type": self.task_type,
            "partition": self.partition,
            "version": self.version,
        }

    @classmethod
    def route(
        cls,
        namespace: str,
        task_queue: str,
        behavior: str,
        deployment_version: str | None = None,
        task_type: str = "workflow",
        partition: int = 0,
    ) -> LegacyQueue:
        """Where a v0.3 host spooled a run's task: `@auto` for auto-upgrade runs, the
        deployment version for pinned runs, the default queue otherwise."""
        version = {"auto_upgrade": "auto", "pinned": deployment_version or ""}.get(behavior, "")
        return cls(namespace, task_queue, task_type, partition, version)


# connections -----------------------------------------------------------------------------
class LegacyStatementFailed(QueueguardError):
    """A legacy statement the server rejected (e.g. undefined column on a newer schema)."""

    def __init__(self, worker: str, statement: str, sqlstate: str, message: str) -> None:
        self.worker, self.statement, self.sqlstate = worker, statement, sqlstate
        super().__init__(f"{worker} statement {statement} failed: [{sqlstate}] {message}")

    @property
    def unresolved(self) -> bool:
        return self.sqlstate in UNRESOLVED_SQLSTATES


class _DriverError(Exception):
    def __init__(self, sqlstate: str, message: str) -> None:
        super().__init__(message)
        self.sqlstate = sqlstate


class Session(Protocol):
    def run(self, sql: str, params: Mapping[str, Any]) -> list[Row]: ...

    def close(self) -> None: ...


class _Pg8000Session:
    def __init__(self, dsn: str, application_name: str | None) -> None:
        import pg8000.native

        p = params(dsn)
        kwargs: dict[str, Any] = {
            "user": p.get("user", "postgres"),
            "database": p.get("dbname"),
            "password": p.get("password"),
            "application_name": application_name,
            "timeout": 10,
        }
        host, port = p.get("host", "localhost"), int(p.get("port", "5432"))
        if host.startswith("/"):
            kwargs["unix_sock"] = f"{host}/.s.PGSQL.{port}"
        else:
            kwargs.update(host=host, port=port)
        self._errors: tuple[type[BaseException], ...] = (pg8000.native.DatabaseError,)
        try:
            self._conn = pg8000.native.Connection(**kwargs)
        except (pg8000.native.InterfaceError, pg8000.native.DatabaseError, OSError) as exc:
            raise ConnectionFailed(f"pg8000 cannot connect to {redact(dsn)}: {exc}") from None

    def run(self, sql: str, params: Mapping[str, Any]) -> list[Row]:
        try:
            rows = self._conn.run(sql, **params)
        except self._errors as exc:
            info = exc.args[0] if exc.args and isinstance(exc.args[0], dict) else {}
            raise _DriverError(str(info.get("C", "")), str(info.get("M", exc))) from None
        return [tuple(r) for r in rows or []]

    def close(self) -> None:
        self._conn.close()


class _PsycopgSession:
    def __init__(self, dsn: str, application_name: str | None) -> None:
        import psycopg

        self._psycopg = psycopg
        try:
            self._conn = psycopg.connect(
                dsn, autocommit=True, application_name=application_name or "", connect_timeout=10
            )
        except psycopg.OperationalError as exc:
            raise ConnectionFailed(f"psycopg cannot connect to {redact(dsn)}: {exc}") from None

    def run(self, sql: str, params: Mapping[str, Any]) -> list[Row]:
        query = _PLACEHOLDER.sub(r"%(\1)s", sql.replace("%", "%%"))
        try:
            cursor = self._conn.execute(query, dict(params))
            return [tuple(r) for r in cursor.fetchall()] if cursor.description else []
        except self._psycopg.Error as exc:
            raise _DriverError(exc.sqlstate or "", str(exc).strip()) from None

    def close(self) -> None:
        self._conn.close()


def default_driver() -> Driver:
    """pg8000 when installed (the independent driver), else psycopg."""
    import importlib.util

    return "pg8000" if importlib.util.find_spec("pg8000") is not None else "psycopg"


def open_session(dsn: str, application_name: str | None, driver: Driver = "pg8000") -> Session:
    if driver == "pg8000":
        return _Pg8000Session(dsn, application_name)
    if driver == "psycopg":
        return _PsycopgSession(dsn, application_name)
    raise UsageError(f"unknown driver {driver!r} (have: {', '.join(DRIVERS)})")


# workers --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Executed:
    """One statement the worker sent, and how it ended ("ok" or the error's first words)."""

    name: str
    outcome: str


@dataclass(frozen=True)
class LoadedQueue:
    range_id: int
    ack_level: int
    last_task_id: int


class LegacyWorker:
    """A legacy host: one connection, the catalog's statements, one transaction per call."""

    worker: ClassVar[str]

    def __init__(self, dsn: str, *, host_id: str = "legacy", driver: Driver = "pg8000") -> None:
        self.catalog = load_catalog(self.worker)
        self.dsn, self.host_id, self.driver = dsn, host_id, driver
        self.executed: list[Executed] = []
        self._session: Session | None = None

    @property
    def application_name(self) -> str | None:
        return None

    def connect(self) -> None:
        if self._session is None:
            self._session = open_session(self.dsn, self.application_name, self.driver)

    def close(self) -> None:
        if self._session is not None:
            self._session.close()
            self._session = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> None:
        """Connect as the host did at startup (and run its startup statements)."""
        raise NotImplementedError

    def _check(self, name: str, rows: list[Row]) -> None:
        """The host's own verdict on a statement's rows (the v0.3 handshake refuses)."""

    def _failed(self, name: str, exc: _DriverError) -> QueueguardError:
        return LegacyStatementFailed(self.worker, name, exc.sqlstate, str(exc))

    def _control(self, session: Session, command: str) -> None:
        try:
            session.run(command, {})
        except _DriverError as exc:
            raise self._failed(command, exc) from None

    def execute(self, name: str, **params: Any) -> list[Row]:
        """Run statement `name` (after what it requires) in one transaction."""
        self.connect()
        session = self._session
        assert session is not None
        statement = self.catalog[name]
        step, logged = name, False
        try:
            self._control(session, "BEGIN")
            for step in (*statement.requires, name):
                logged = False
                wanted = {k: params[k] for k in self.catalog[step].placeholders}
                try:
                    rows = session.run(self.catalog[step].sql, wanted)
                except _DriverError as exc:
                    raise self._failed(step, exc) from None
                self._check(step, rows)
                self.executed.append(Executed(step, "ok"))
                logged = True
            self._control(session, "COMMIT")
        except BaseException as exc:
            if not logged:
                self.executed.append(Executed(step, f"{type(exc).__name__}: {exc}"[:200]))
            with contextlib.suppress(_DriverError):  # a broken connection rolls back anyway
                session.run("ROLLBACK", {})
            raise
        return rows


class V03Worker(LegacyWorker):
    """A queueguard v0.3 host (protocol 3)."""

    worker = "v0.3"
    protocol = 3

    def __init__(self, dsn: str, *, host_id: str = "legacy", driver: Driver = "pg8000") -> None:
        super().__init__(dsn, host_id=host_id, driver=driver)
        #: queue key -> range held by this host's loaded manager (process-local)
        self.ranges: dict[str, int] = {}

    @property
    def application_name(self) -> str:
        name = f"queueguard/{self.protocol} host={self.host_id}".encode()[:63]
        return name.decode("utf-8", errors="ignore")

    def _failed(self, name: str, exc: _DriverError) -> QueueguardError:
        if name == "handshake" and exc.sqlstate == "42P01":  # no runtime_protocol table
            return ProtocolMismatch(self.protocol, None, None)
        return super()._failed(name, exc)

    def _check(self, name: str, rows: list[Row]) -> None:
        if name != "handshake":
            return
        if len(rows) != 1:
            raise ProtocolMismatch(self.protocol, None, None)
        low, high = rows[0]
        if not low <= self.protocol <= high:
            raise ProtocolMismatch(self.protocol, low, high)

    def start(self) -> None:
        """Connect and run the startup handshake, before anything is loaded."""
        self.connect()
        self.execute("handshake")

    def load(self, queue: LegacyQueue) -> LoadedQueue:
        self.ranges.pop(queue.key, None)
        (row,) = self.execute("load", **queue.params())
        loaded = LoadedQueue(*row)
        self.ranges[queue.key] = loaded.range_id
        return loaded

    def _held(self, queue: LegacyQueue) -> int:
        held = self.ranges.get(queue.key)
        if held is None:
            raise QueueUnloaded(f"queue {queue.key} is not loaded by {self.application_name}")
        return held

    def _conflict(self, queue: LegacyQueue, held: int) -> StaleRangeError:
        rows = self.execute("current_range", key=queue.key)
        self.ranges.pop(queue.key, None)  # the manager unloads
        return StaleRangeError(queue.key, held, rows[0][0] if rows else None)

    def append(self, queue: LegacyQueue, data: Mapping[str, Any]) -> int:
        held = self._held(queue)
        rows = self.execute("append", key=queue.key, range_id=held, data=json.dumps(data))
        if not rows:
            raise self._conflict(queue, held)
        return int(rows[0][0])

    def read(self, queue: LegacyQueue, above: int = 0, limit: int = 100) -> list[Row]:
        return self.execute("read", key=queue.key, above=above, limit=limit)

    def checkpoint(self, queue: LegacyQueue, ack_level: int) -> int:
        """Save the ack level and delete the handled prefix; returns rows deleted."""
        held = self._held(queue)
        ((saved, deleted),) = self.execute(
            "checkpoint", key=queue.key, range_id=held, ack_level=ack_level
        )
        if saved == 0:
            conflict = self._conflict(queue, held)
            if conflict.current == held:
                self.ranges[queue.key] = held
                raise ValueError(f"ack level {ack_level} outside the queue's stored bounds")
            raise conflict
        return int(deleted)

    def record_start(self, run_id: str, scheduled_event_id: int) -> str:
        ((outcome,),) = self.execute(
            "record_start", run_id=run_id, scheduled_event_id=scheduled_event_id
        )
        return str(outcome)


class V02Worker(LegacyWorker):
    """A queueguard v0.2 host: delivery-id spool, no ownership, no handshake."""

    worker = "v0.2"

    def start(self) -> None:
        """v0.2 hosts connected and went straight to work: no handshake to refuse them."""
        self.connect()

    def spool(self, queue: LegacyQueue, data: Mapping[str, Any]) -> int:
        params = queue.params()
        del params["key"]
        ((delivery_id,),) = self.execute("spool", data=json.dumps(data), **params)
        return int(delivery_id)

    def read(self, queue: LegacyQueue, limit: int = 100) -> list[Row]:
        params = queue.params()
        del params["key"]
        return self.execute("read", limit=limit, **params)

    def delete(self, delivery_id: int) -> None:
        self.execute("delete", delivery_id=delivery_id)

    def get_user_data(self, namespace: str, task_queue: str) -> tuple[int, Any]:
        rows = self.execute("get_user_data", namespace=namespace, task_queue=task_queue)
        return (int(rows[0][0]), rows[0][1]) if rows else (0, None)

    def put_user_data(
        self, namespace: str, task_queue: str, expected: int, data: Mapping[str, Any]
    ) -> int:
        name = "insert_user_data" if expected == 0 else "update_user_data"
        rows = self.execute(
            name,
            namespace=namespace,
            task_queue=task_queue,
            expected=expected,
            data=json.dumps(data),
        )
        if not rows:
            actual, _ = self.get_user_data(namespace, task_queue)
            raise UserDataConflict(namespace, task_queue, expected, actual)
        return int(rows[0][0])


def worker_class(worker: str) -> type[LegacyWorker]:
    classes: dict[str, type[LegacyWorker]] = {"v0.2": V02Worker, "v0.3": V03Worker}
    if worker not in classes:
        raise UsageError(f"unknown legacy worker {worker!r} (have: {', '.join(WORKERS)})")
    return classes[worker]


# the fence, probed end to end -------------------------------------------------------------
PROBE_AUTO = LegacyQueue("queueguard-fence-probe", "orders", version="auto")
PROBE_DEFAULT = LegacyQueue("queueguard-fence-probe", "orders")
PROBE_TASK = {
    "task": {
        "namespace": "queueguard-fence-probe",
        "workflowId": "probe",
        "runId": "00000000-0000-0000-0000-000000000000",
        "kind": "workflow",
        "scheduledEventId": 1,
        "attempt": 1,
    },
    "enqueuedAt": "2026-01-01T00:00:00Z",
}


@dataclass
class FenceProbe:
    """What `probe_fence` saw; `ok` when every legacy call failed and nothing changed."""

    driver: Driver = "pg8000"
    ok: bool = True
    handshake_ms: float | None = None
    findings: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)

    def expect(self, what: str, call: Callable[[], object], *errors: type[BaseException]) -> None:
        try:
            call()
        except errors as exc:
            self.findings.append(f"{what}: {type(exc).__name__}")
            return
        except Exception as exc:  # an unexpected kind of failure is a failure of the probe
            self.failures.append(f"{what}: unexpected {type(exc).__name__}: {exc}")
        else:
            self.failures.append(f"{what}: succeeded, expected it to be fenced")
        self.ok = False

    @property
    def detail(self) -> str:
        head = "; ".join(self.failures) if self.failures else "; ".join(self.findings)
        timing = (
            f"; v0.3 refused at its handshake in {self.handshake_ms:.0f} ms"
            if self.handshake_ms is not None
            else ""
        )
        return f"{self.driver}: {head}{timing}"


def probe_fence(
    dsn: str,
    revision: str,
    upgrade: Callable[[str], object],
    checksums: Callable[[str], dict[str, str]],
    driver: Driver | None = None,
) -> FenceProbe:
    """On a database at an old `revision`: start the legacy hosts that run on it, call
    `upgrade(dsn)` (it must pass force: a v0.3 host stays connected), then prove every legacy
    call fails — old hosts at their next range-checked write and reload, new hosts at their
    handshake or first statement — and that `checksums(dsn)` did not change."""
    driver = driver or default_driver()
    probe = FenceProbe(driver=driver)
    old_v03 = V03Worker(dsn, host_id="fence-probe-old", driver=driver)
    old_v02 = V02Worker(dsn, host_id="fence-probe-old", driver=driver)
    try:
        if revision == old_v03.catalog.revision:
            old_v03.start()
            old_v03.load(PROBE_AUTO)
            old_v03.append(PROBE_AUTO, PROBE_TASK)
            old_v03.load(PROBE_DEFAULT)
        if revision < "003":
            old_v02.start()
            old_v02.spool(PROBE_DEFAULT, PROBE_TASK)
        upgrade(dsn)
        before = checksums(dsn)
        if old_v03.ranges:
            probe.expect(
                "old v0.3 append", lambda: old_v03.append(PROBE_AUTO, PROBE_TASK), StaleRangeError
            )
            probe.expect(
                "old v0.3 checkpoint", lambda: old_v03.checkpoint(PROBE_DEFAULT, 0), StaleRangeError
            )
            probe.expect("old v0.3 reload", lambda: old_v03.load(PROBE_AUTO), ProtocolMismatch)
        if revision < "003":
            probe.expect(
                "old v0.2 spool",
                lambda: old_v02.spool(PROBE_DEFAULT, PROBE_TASK),
                LegacyStatementFailed,
            )
        with V03Worker(dsn, host_id="fence-probe-new", driver=driver) as new_v03:
            started = time.perf_counter()
            probe.expect("new v0.3 start", new_v03.start, ProtocolMismatch)
            probe.handshake_ms = (time.perf_counter() - started) * 1000
        with V02Worker(dsn, host_id="fence-probe-new", driver=driver) as new_v02:
            new_v02.start()
            probe.expect(
                "new v0.2 read", lambda: new_v02.read(PROBE_DEFAULT), LegacyStatementFailed
            )
        after = checksums(dsn)
        changed = sorted(t for t in set(before) | set(after) if before.get(t) != after.get(t))
        if changed:
            probe.ok = False
            probe.failures.append(f"legacy calls changed tables {changed}")
        else:
            probe.findings.append("nothing changed")
    finally:
        old_v03.close()
        old_v02.close()
    return probe


# command line -------------------------------------------------------------------------------
def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m queueguard.upgrade.legacy_worker",
        description="Start a released legacy host (v0.2/v0.3) against a database.",
    )
    parser.add_argument("--worker", choices=WORKERS, default="v0.3")
    parser.add_argument("--dsn", required=True)
    parser.add_argument("--host-id", default="legacy")
    parser.add_argument("--driver", choices=DRIVERS, default="pg8000")
    args = parser.parse_args(argv)
    worker = worker_class(args.worker)(args.dsn, host_id=args.host_id, driver=args.driver)
    label = worker.application_name or f"queueguard {args.worker}"
    try:
        worker.start()
        if isinstance(worker, V02Worker):
            worker.read(LegacyQueue("default", "default"), limit=1)  # its first poll
    except QueueguardError as exc:
        print(f"{label}: error: {redact(str(exc))}", file=sys.stderr)
        return exc.exit_code
    finally:
        worker.close()
    print(f"{label}: started")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
