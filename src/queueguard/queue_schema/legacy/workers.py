"""The released v0.2 and v0.3 hosts, replayed from their statement catalogs (transactions,
the v0.3 handshake and its refusal rule, the range-conflict report)."""

from __future__ import annotations

import contextlib
import json
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Self

from queueguard.errors import (
    LegacyStatementFailed,
    ProtocolMismatch,
    QueueguardError,
    QueueUnloaded,
    StaleRangeError,
    UsageError,
    UserDataConflict,
)
from queueguard.queue_schema.legacy.catalog import WORKERS, load_catalog
from queueguard.queue_schema.legacy.sessions import Driver, DriverError, Row, Session, open_session


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

    def _failed(self, name: str, exc: DriverError) -> QueueguardError:
        return LegacyStatementFailed(self.worker, name, exc.sqlstate, str(exc))

    def _control(self, session: Session, command: str) -> None:
        try:
            session.run(command, {})
        except DriverError as exc:
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
                except DriverError as exc:
                    raise self._failed(step, exc) from None
                self._check(step, rows)
                self.executed.append(Executed(step, "ok"))
                logged = True
            self._control(session, "COMMIT")
        except BaseException as exc:
            if not logged:
                self.executed.append(Executed(step, f"{type(exc).__name__}: {exc}"[:200]))
            with contextlib.suppress(DriverError):  # a broken connection rolls back anyway
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

    def _failed(self, name: str, exc: DriverError) -> QueueguardError:
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
