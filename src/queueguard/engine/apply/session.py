"""The runner's session on the target: its limits, the runner lock, and the transaction a
revision (or the part of one between two statements outside a transaction) runs in."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import psycopg

from queueguard.engine import topology
from queueguard.engine.apply import runner_lock
from queueguard.engine.apply.ladder import RUNNER_WAIT_S
from queueguard.engine.plan.apply import first_line
from queueguard.errors import ConnectionFailed, MigrationError
from queueguard.pg.connect import connect, connection_lost
from queueguard.pg.dsn import redact

APPLICATION_NAME = "queueguard-upgrade"


@dataclass(frozen=True)
class Limits:
    lock_timeout_ms: int = 5000
    statement_timeout_ms: int = 3_600_000
    retries: int = 3
    runner_wait_s: float = RUNNER_WAIT_S


def begin(conn: psycopg.Connection[Any], limits: Limits, lock_timeout_ms: int) -> None:
    """A revision transaction: the runner lock, then the revision's own timeouts."""
    runner_lock.take(conn, limits.runner_wait_s, restart=conn.rollback)
    conn.execute(f"SET LOCAL lock_timeout = {lock_timeout_ms}")
    conn.execute(f"SET LOCAL statement_timeout = {limits.statement_timeout_ms}")


def stopped(dsn: str, revision: str | None, exc: psycopg.Error) -> Exception:
    """A database error no step handled, as one line: a lost server (exit 2) or the
    revision it stopped (exit 1)."""
    if connection_lost(exc):
        return ConnectionFailed(lost(dsn, revision, exc))
    where = f"revision {revision}" if revision else "the upgrade"
    return MigrationError(f"{where} stopped: {first_line(exc)}")


def lost(dsn: str, revision: str | None, exc: BaseException) -> str:
    """The one ending of every runner that lost its server (exit 2): where, and that a rerun
    is safe."""
    where = f"during revision {revision}" if revision else "between revisions"
    return (
        f"lost the server {where} ({redact(dsn)}: {redact(first_line(exc))}); a revision commits "
        "whole or, past a statement that runs outside a transaction, resumes where it "
        "stopped: rerun queueguard upgrade against the primary, it is safe"
    )


def online_name() -> str:
    """The application_name of `upgrade --online`'s sessions: ours, with the runner's pid and
    host, so a rerun can tell a killed runner's backends (still building or filling) from a
    live second runner's."""
    return f"{APPLICATION_NAME} online {os.getpid()}@{socket.gethostname()}"[:63]


@contextmanager
def runner_session(dsn: str, limits: Limits) -> Iterator[None]:
    """The runner lock held by a session of its own while the block runs (a set whose
    revisions run through their own tool: Alembic's env.py, Django's migrate), a standby
    refused first; a database error in the block said as `stopped` says it."""
    lock = connect(dsn, application_name=APPLICATION_NAME, autocommit=True)
    try:
        with lock.cursor() as cursor:
            topology.refuse_standby(cursor, "upgrade")
        runner_lock.take_for_statement(lock, limits.runner_wait_s)
        yield
    except psycopg.Error as exc:
        raise stopped(dsn, None, exc) from exc
    finally:
        lock.close()
