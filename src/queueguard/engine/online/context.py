"""What an online form runs its steps through: the runner's connection, its limits and retry
ladder, and the hook that ends the statement (its progress moved past it and, for the
revision's last statement, the format's bookkeeping) in the form's last transaction."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import psycopg

from queueguard.engine.apply import outside
from queueguard.engine.apply.ladder import climb
from queueguard.engine.apply.session import Limits, begin
from queueguard.errors import LockTimeout

T = TypeVar("T")
Work = Callable[[psycopg.Connection[Any]], T]


class _Probe(Exception):
    """Ends a probe's transaction by rollback, carrying what it learned."""

    def __init__(self, value: object) -> None:
        self.value = value


@dataclass
class Context:
    conn: psycopg.Connection[Any]
    limits: Limits
    #: runs in the form's last transaction, before its commit
    finish: Callable[[psycopg.Connection[Any]], None] | None = None
    #: what ran, for the report: (sql, seconds, in a transaction)
    ran: list[tuple[str, float, bool]] = field(default_factory=list)
    lock_waits: int = 0

    def transaction(self, work: Work[T], *, last: bool = False) -> T:
        """`work` in one transaction under the runner lock and the limits, retried on a lock
        timeout with the runner's ladder; `last`: the statement's end (the hook runs in it)."""
        return self._ladder(work, last=last, commit=True)

    def probe(self, work: Work[T]) -> T:
        """`work` in a transaction that is rolled back: to ask PostgreSQL what a statement
        would do (the name it would choose) without keeping it."""
        return self._ladder(work, last=False, commit=False)

    def execute(self, sql: str, *, last: bool = False) -> None:
        def run(conn: psycopg.Connection[Any]) -> None:
            began = time.perf_counter()
            conn.execute(sql)
            self.ran.append((sql, time.perf_counter() - began, True))

        self.transaction(run, last=last)

    def alone(self, sql: str) -> None:
        """A statement that runs outside a transaction (a concurrent build), under the
        session-level runner lock; an invalid leftover of the same index is rebuilt."""

        def attempt(timeout: int) -> None:
            limits = Limits(timeout, self.limits.statement_timeout_ms, 0, self.limits.runner_wait_s)
            _, took = outside.run_alone(self.conn, sql, limits, resumed=True)
            self.ran.append((sql, took, False))

        self._climb(attempt)

    def _ladder(self, work: Work[T], *, last: bool, commit: bool) -> T:
        def attempt(timeout: int) -> T:
            begin(self.conn, self.limits, timeout)
            try:
                result = work(self.conn)
                if not commit:
                    raise _Probe(result)
                if last and self.finish is not None:
                    self.finish(self.conn)
                self.conn.commit()
                return result
            except _Probe as probe:
                self.conn.rollback()
                return probe.value  # type: ignore[return-value]
            except BaseException:
                if not self.conn.closed:
                    self.conn.rollback()
                raise

        return self._climb(attempt)

    def _climb(self, attempt: Callable[[int], T]) -> T:
        def waited(_exc: Exception) -> None:
            self.lock_waits += 1

        def give_up(timeout: int, _exc: Exception) -> Exception:
            return LockTimeout(
                f"could not get the locks of an online step after {self.limits.retries + 1} "
                f"attempts (last lock_timeout {timeout} ms); what committed before stays, "
                "a rerun resumes there"
            )

        return climb(
            attempt, self.limits.lock_timeout_ms, self.limits.retries,
            waited=waited, give_up=give_up,
        )  # fmt: skip
