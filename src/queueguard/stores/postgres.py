"""The PostgreSQL store: the runtime's statements from `sql/runtime.sql` over a pool."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any

import psycopg
from psycopg.rows import TupleRow
from psycopg.types.json import Jsonb
from psycopg_pool import ConnectionPool

from queueguard.core.history import dedupe_starts, version_directive
from queueguard.core.installer import Installer
from queueguard.core.keys import PhysicalQueue
from queueguard.core.protocol import PROTOCOL
from queueguard.core.store import (
    DEFAULT_START_TIMEOUT,
    JSON,
    CompletionOutcome,
    Execution,
    ExpiredStart,
    QueueState,
    Start,
    StartOutcome,
    Task,
    UserData,
    require_json_object,
    validate_start_timeout,
)
from queueguard.errors import (
    ConnectionFailed,
    StaleRangeError,
    UserDataConflict,
)
from queueguard.pg.connect import CONNECT_TIMEOUT_S, connection_lost, reason
from queueguard.pg.dsn import application_name, redact, validate
from queueguard.pg.sqlfiles import queries
from queueguard.stores import schema
from queueguard.stores.schema import check_protocol

Q = queries("queueguard.stores", "runtime.sql")
Conn = psycopg.Connection[TupleRow]


def _params(queue: PhysicalQueue, **extra: Any) -> dict[str, Any]:
    return {
        "key": queue.key,
        "namespace": queue.namespace,
        "task_queue": queue.task_queue,
        "task_type": queue.task_type,
        "partition": queue.partition,
        "version": queue.version,
        **extra,
    }


class PostgresHistory:
    """History's two tables, through the store's pool. Starts are stamped with the server's
    clock (`now()`), unless a `clock` is injected (tests: the start timeout without sleeping)."""

    def __init__(
        self,
        store: PostgresStore,
        *,
        start_timeout: float | None = DEFAULT_START_TIMEOUT,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self._store = store
        self._start_timeout = validate_start_timeout(start_timeout)
        self._clock = clock

    @property
    def start_timeout(self) -> float | None:
        return self._start_timeout

    def _timing(self) -> dict[str, Any]:
        """The statements' `now` (NULL: the server's) and `timeout` (NULL: none)."""
        now = self._clock() if self._clock is not None else None
        return {"now": now, "timeout": self._start_timeout}

    def add_execution(self, execution: Execution) -> None:
        with self._store.transaction() as conn:
            conn.execute(Q["add_execution"], execution.__dict__)

    def schedule_task(self, run_id: str, scheduled_event_id: int, kind: str) -> None:
        with self._store.transaction() as conn:
            conn.execute(
                Q["schedule_task"],
                {"run_id": run_id, "scheduled_event_id": scheduled_event_id, "kind": kind},
            )

    def set_status(self, run_id: str, status: str) -> None:
        with self._store.transaction() as conn:
            conn.execute(Q["set_status"], {"run_id": run_id, "status": status})

    def version_directive(self, run_id: str) -> JSON:
        if not _is_canonical_uuid(run_id):  # 004 matches run ids by their text form
            return version_directive(None)
        with self._store.statement() as conn:
            row = conn.execute(Q["version_directive"], {"run_id": run_id}).fetchone()
        if row is None:
            return version_directive(None)
        return {"behavior": row[0], "deploymentVersion": row[1]}

    def _start_one(self, run_id: str, scheduled_event_id: int) -> Start:
        if not _is_uuid(run_id):
            return Start(StartOutcome.OBSOLETE)  # History knows runs by uuid only
        params = {"run_id": run_id, "scheduled_event_id": scheduled_event_id, **self._timing()}
        with self._store.statement() as conn:  # one statement: its own transaction
            row = conn.execute(Q["record_task_started"], params).fetchone()
        assert row is not None
        return Start(StartOutcome(row[0]), row[1])

    def start_tasks(self, identities: Sequence[tuple[str, int]]) -> list[Start]:
        """One statement (one transaction) for the whole batch."""
        if len(identities) == 1:
            return [self._start_one(*identities[0])]
        return dedupe_starts(identities, self._start_distinct)

    def record_task_started(self, run_id: str, scheduled_event_id: int) -> StartOutcome:
        return self._start_one(run_id, scheduled_event_id).outcome

    def record_tasks_started(self, identities: Sequence[tuple[str, int]]) -> list[StartOutcome]:
        return [start.outcome for start in self.start_tasks(identities)]

    def _start_distinct(self, identities: list[tuple[str, int]]) -> list[Start]:
        valid = [(r, e) for r, e in identities if _is_uuid(r)]
        answers: dict[tuple[str, int], Start] = {}
        if valid:
            params = {
                "run_ids": [r for r, _ in valid],
                "event_ids": [e for _, e in valid],
                **self._timing(),
            }
            with self._store.statement() as conn:
                rows = conn.execute(Q["record_tasks_started"], params).fetchall()
            answers = {
                i: Start(StartOutcome(row[0]), row[1]) for i, row in zip(valid, rows, strict=True)
            }
        return [answers.get(i, Start(StartOutcome.OBSOLETE)) for i in identities]

    def record_task_completed(
        self, run_id: str, scheduled_event_id: int, started_at: datetime | None
    ) -> CompletionOutcome:
        if started_at is None or not _is_uuid(run_id):
            return CompletionOutcome.OBSOLETE
        params = {"run_id": run_id, "scheduled_event_id": scheduled_event_id}
        with self._store.statement() as conn:
            row = conn.execute(
                Q["record_task_completed"], {**params, "started_at": started_at}
            ).fetchone()
        return CompletionOutcome.OBSOLETE if row is None else CompletionOutcome.COMPLETED

    def expired_starts(self, limit: int) -> list[ExpiredStart]:
        if self._start_timeout is None or limit < 1:
            return []
        with self._store.statement() as conn:
            rows = conn.execute(Q["expired_starts"], {"limit": limit, **self._timing()}).fetchall()
        return [
            ExpiredStart(
                r[0], r[1], r[2], r[3], r[4], r[5], {"behavior": r[6], "deploymentVersion": r[7]}
            )
            for r in rows
        ]

    def reschedule_expired(self, start: ExpiredStart) -> bool:
        params = {
            "run_id": start.run_id,
            "scheduled_event_id": start.scheduled_event_id,
            "started_at": start.started_at,
            **self._timing(),
        }
        with self._store.statement() as conn:
            row = conn.execute(Q["reschedule_expired"], params).fetchone()
        return row is not None


def _is_canonical_uuid(run_id: object) -> bool:
    return _is_uuid(run_id) and str(uuid.UUID(run_id)) == run_id  # type: ignore[arg-type]


def _is_uuid(run_id: object) -> bool:
    try:
        uuid.UUID(run_id)  # type: ignore[arg-type]
    except (ValueError, TypeError, AttributeError):
        return False
    return True


class PostgresStore:
    """A Store on PostgreSQL. Each instance owns an independent connection pool."""

    def __init__(
        self,
        dsn: str,
        *,
        host_id: str = "local",
        pool_size: int = 4,
        create_schema: bool | Installer = True,
        prepare: bool = True,
        start_timeout: float | None = DEFAULT_START_TIMEOUT,
        history_clock: Callable[[], datetime] | None = None,
    ) -> None:
        """`prepare=False` for a transaction pooler (PgBouncer in transaction mode before 1.21):
        no server-side prepared statements, the only session state the store would use.
        `start_timeout`: History's (seconds; None: none; give every host the same);
        `history_clock`: stamps starts instead of the server's `now()` (tests)."""
        validate_start_timeout(start_timeout)
        self.dsn = validate(dsn)
        self.application_name = application_name(PROTOCOL, host_id)
        # Startup handshake before anything is registered or loaded (docs/interfaces.md).
        schema.prepare_runtime(dsn, installer=create_schema, app=self.application_name)
        self._pool: ConnectionPool[Conn] = ConnectionPool(
            dsn,
            min_size=1,
            max_size=pool_size,
            kwargs={
                "application_name": self.application_name,
                "connect_timeout": CONNECT_TIMEOUT_S,
                # single statements run as their own transaction (one round trip);
                # multi-statement work goes through transaction() (BEGIN … COMMIT)
                "autocommit": True,
                # psycopg prepares a statement after its 5th use by default
                "prepare_threshold": 5 if prepare else None,
            },
            open=False,
            name=f"queueguard-{host_id}",
        )
        try:
            self._pool.open(wait=True, timeout=CONNECT_TIMEOUT_S)
        except psycopg.OperationalError as exc:  # pragma: no cover - covered via schema check
            raise ConnectionFailed(f"cannot connect to {redact(dsn)}: {reason(exc)}") from None
        self.history = PostgresHistory(self, start_timeout=start_timeout, clock=history_clock)

    @contextmanager
    def _connection_errors(self) -> Iterator[None]:
        """A lost connection becomes ConnectionFailed (a commit in flight has an unknown
        outcome); errors the server answered pass through."""
        try:
            yield
        except psycopg.OperationalError as exc:
            if not connection_lost(exc):
                raise
            raise ConnectionFailed(
                f"lost the connection to {redact(self.dsn)}: {redact(str(exc)).strip()}"
            ) from exc

    @contextmanager
    def transaction(self) -> Iterator[Conn]:
        """One transaction on a pooled connection; rolled back on any error."""
        with self._connection_errors(), self._pool.connection() as conn, conn.transaction():
            yield conn

    @contextmanager
    def statement(self) -> Iterator[Conn]:
        """A pooled autocommit connection for ONE statement, which is its own transaction
        (atomic, one round trip instead of BEGIN, statement, COMMIT)."""
        with self._connection_errors(), self._pool.connection() as conn:
            yield conn

    def check_protocol(self) -> None:
        with self.transaction() as conn:
            check_protocol(conn)

    def load_queue(self, queue: PhysicalQueue) -> QueueState:
        with self.transaction() as conn:
            low, _high = check_protocol(conn)
            # An online rollout's window lets older hosts in too: mark the queue as ours.
            # The handshake holds runtime_protocol until commit, so the window cannot close
            # (and the column go) between the read and the load.
            window = low < PROTOCOL
            row = conn.execute(Q["load_queue_window" if window else "load_queue"], _params(queue))
            found = row.fetchone()
        assert found is not None
        range_id, ack_level, last_task_id, shared = found
        return QueueState(range_id, ack_level, last_task_id, shared=shared)

    def _stale(self, conn: Conn, queue: PhysicalQueue, range_id: int) -> StaleRangeError:
        row = conn.execute(Q["current_range"], {"key": queue.key}).fetchone()
        return StaleRangeError(queue.key, range_id, row[0] if row else None)

    def append(self, queue: PhysicalQueue, range_id: int, payloads: Sequence[JSON]) -> list[int]:
        docs = [require_json_object(p) for p in payloads]
        if not docs:
            return []
        # one jsonb array document: a jsonb[] parameter would quote every element in Python
        params = {"key": queue.key, "range_id": range_id, "n": len(docs), "payloads": Jsonb(docs)}
        with self.statement() as conn:  # allocation and insert: one statement, one commit
            row = conn.execute(Q["append_tasks"], params).fetchone()
            if row is None:
                raise self._stale(conn, queue, range_id)
        first, inserted = row
        assert inserted == len(docs), (inserted, len(docs))
        return list(range(first, first + len(docs)))

    def read(self, queue: PhysicalQueue, above: int, limit: int) -> list[Task]:
        with self.statement() as conn:
            rows = conn.execute(
                Q["read_tasks"], {"key": queue.key, "above": above, "limit": limit}
            ).fetchall()
        return [Task(task_id, data) for task_id, data in rows]

    def checkpoint(self, queue: PhysicalQueue, range_id: int, ack_level: int) -> None:
        with self.statement() as conn:  # save + delete: one statement, one commit
            row = conn.execute(
                Q["checkpoint"],
                {"key": queue.key, "range_id": range_id, "ack_level": ack_level},
            ).fetchone()
            assert row is not None
            if row[0] == 0:
                stale = self._stale(conn, queue, range_id)
                if stale.current == range_id:
                    raise ValueError(f"ack level {ack_level} outside the queue's stored bounds")
                raise stale

    def queue_state(self, queue: PhysicalQueue) -> QueueState | None:
        with self.transaction() as conn:
            row = conn.execute(Q["queue_state"], {"key": queue.key}).fetchone()
        return QueueState(*row) if row else None

    def task_ids(self, queue: PhysicalQueue) -> list[int]:
        with self.transaction() as conn:
            return [r[0] for r in conn.execute(Q["task_ids"], {"key": queue.key})]

    def get_user_data(self, namespace: str, task_queue: str) -> UserData:
        with self.transaction() as conn:
            row = conn.execute(
                Q["get_user_data"], {"namespace": namespace, "task_queue": task_queue}
            ).fetchone()
        return UserData(row[0], row[1]) if row else UserData(0, None)

    def put_user_data(
        self, namespace: str, task_queue: str, expected_version: int, data: JSON
    ) -> int:
        params = {
            "namespace": namespace,
            "task_queue": task_queue,
            "expected": expected_version,
            "data": Jsonb(data),
        }
        with self.transaction() as conn:
            name = "insert_user_data" if expected_version == 0 else "update_user_data"
            row = conn.execute(Q[name], params).fetchone()
            if row is not None:
                return int(row[0])
            found = conn.execute(Q["get_user_data"], params).fetchone()
        raise UserDataConflict(namespace, task_queue, expected_version, found[0] if found else 0)

    def close(self) -> None:
        self._pool.close()
