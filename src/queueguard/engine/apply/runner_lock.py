"""The runner lock: one upgrade of a target at a time, for every format and every path
(`upgrade`, `upgrade --online`, queueguard's own online rollout, `fleet`). This module is
the only one that takes it.

It is transaction-scoped: taken first in each transaction that changes the schema, with the
version re-read under it by the caller, and released by that transaction's COMMIT or
ROLLBACK — so it holds through a transaction pooler and a killed runner leaves none behind.
A statement that must run outside a transaction (CREATE INDEX CONCURRENTLY, …) holds it at
session level for that statement alone.

It is polled with a try-lock, never waited for inside a statement: a waiting statement
holds a snapshot, and another runner's CREATE INDEX CONCURRENTLY waits for every older
snapshot while that runner holds the lock — a deadlock. Between tries nothing is held: the
caller's transaction is rolled back when it owns it (`restart`), and a transaction a tool
manages (an Alembic revision's) keeps no snapshot between statements in READ COMMITTED."""

from __future__ import annotations

import time
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any

from queueguard.errors import RunnerBusy
from queueguard.pg.sqlfiles import queries

Q = queries("queueguard.engine.apply", "runner_lock.sql")
#: the lock's key in this context: one per target. A database keeps the key every `upgrade`
#: takes (so `upgrade` and `fleet` exclude each other); `fleet` sets its own for a schema
#: target (`fleet.apply`), so two schemas of one database upgrade side by side.
RUNNER_KEY: ContextVar[str] = ContextVar("runner_key", default="queueguard-upgrade")


def take(on: Any, wait_s: float, *, restart: Callable[[], None] | None = None) -> None:
    """The transaction-scoped lock, on `on` (a psycopg connection or cursor), polled for up
    to `wait_s`, then RunnerBusy. `restart` runs between tries (a rollback, when the caller's
    transaction holds nothing yet)."""
    _poll(on, "in_transaction", wait_s, restart)


def take_for_statement(
    on: Any, wait_s: float, *, restart: Callable[[], None] | None = None
) -> None:
    """The session-level lock, for one statement outside a transaction (`release_statement`
    after it)."""
    _poll(on, "for_statement", wait_s, restart)


def release_statement(on: Any) -> None:
    on.execute(Q["release_statement"], {"key": RUNNER_KEY.get()})


def _poll(on: Any, query: str, wait_s: float, restart: Callable[[], None] | None) -> None:
    deadline = time.monotonic() + wait_s
    pause = 0.02
    while True:
        row = on.execute(Q[query], {"key": RUNNER_KEY.get()}).fetchone()
        if row and row[0]:
            return
        if restart is not None:
            restart()
        if time.monotonic() >= deadline:
            raise RunnerBusy(int(wait_s * 1000))
        time.sleep(pause)
        pause = min(pause * 2, 0.5)
