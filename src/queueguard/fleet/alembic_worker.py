"""Alembic targets in worker processes: Alembic's `context` is one per process, so a runner
upgrades Alembic sets (queueguard's own among them) each in a process of its own, started
once per worker (`spawn`: no state of the runner's threads inherited) and reused for target
after target, so env.py's imports are paid once per worker.

A worker gets each target's DSN through its pipe, never on a command line; it dies with
its runner (the pipe's end closes); each upgrade runs exactly as `queueguard upgrade` runs it,
the check that env.py connected where it was told included. Cancelling a target's
statement (its lease lost, a signal's grace over) sends the worker SIGUSR1: psycopg cancels
the statement in flight, the revision rolls back, and the worker reports and ends (the next
target gets a new one). A Ctrl-C, which reaches the whole process group, is the runner's
to handle: workers ignore SIGINT and SIGTERM."""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import threading
from dataclasses import asdict
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from queueguard.engine.apply.session import Limits
from queueguard.errors import MigrationError, QueueguardError

#: how often the runner looks whether a target in a worker must be cancelled
POLL_S = 0.2
#: the signal that cancels a worker's statement (not SIGINT: a Ctrl-C reaches the whole
#: process group, and the runner's grace decides)
CANCEL = signal.SIGUSR1


class Cancelled(MigrationError):
    """A target's statement in a worker was cancelled (its lease lost, a signal's grace)."""


def _cancel(_signum: int, _frame: object) -> None:
    raise KeyboardInterrupt  # psycopg cancels the statement it waits on


def _die_with_parent() -> None:
    """Linux: the kernel kills the worker when its runner dies, even by SIGKILL."""
    with contextlib.suppress(Exception):
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def serve(conn: Connection, root: str, fmt: str) -> None:
    """The worker's loop: one upgrade per message, its report or its error back. A Ctrl-C
    or a SIGTERM to the runner's process group is the runner's to handle (its grace):
    the worker ignores both and cancels only when the runner sends CANCEL."""
    _die_with_parent()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(CANCEL, _cancel)
    from queueguard import sets

    mset = sets.load(Path(root), fmt)
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):  # the runner is gone
            return
        if message is None:
            return
        try:
            conn.send(("ok", _upgrade(mset, root, **message)))
        except KeyboardInterrupt:
            conn.send(("cancelled", "its statement was cancelled; the revision rolled back"))
            return
        except QueueguardError as exc:
            conn.send(("error", type(exc).__name__, str(exc), exc.exit_code))
        except Exception as exc:  # a target's failure is reported, the worker goes on
            conn.send(("error", type(exc).__name__, str(exc), 1))


def _upgrade(
    mset: Any, root: str, dsn: str, to: str | None, limits: dict[str, Any], key: str
) -> dict[str, Any]:
    from queueguard.engine.apply.runner_lock import RUNNER_KEY

    RUNNER_KEY.set(key)  # the target's runner lock (a schema target's own)
    chosen = Limits(**limits)
    if mset.format == "queueguard":
        from queueguard import revisions
        from queueguard.queue_schema import runner

        report = runner.upgrade(
            dsn, to=to or "head", lock_timeout_ms=chosen.lock_timeout_ms,
            statement_timeout_ms=chosen.statement_timeout_ms, retries=chosen.retries,
            progress=False, migrations=revisions.load(Path(root)),
            runner_wait_s=chosen.runner_wait_s,
        )  # fmt: skip
    else:
        from queueguard.engine.apply.runner import upgrade

        report = upgrade(mset, dsn, to=to, limits=chosen)
    return {"before": report.before, "after": report.after, "applied": list(report.applied),
            "lock_waits": report.lock_waits}  # fmt: skip


class Worker:
    """One worker process, used by one runner thread at a time."""

    def __init__(self, root: Path, fmt: str) -> None:
        context = multiprocessing.get_context("spawn")
        self.conn, child = context.Pipe()
        self.process = context.Process(
            target=serve, args=(child, str(root), fmt), daemon=True, name="queueguard-alembic"
        )
        self.process.start()
        child.close()

    @property
    def alive(self) -> bool:
        return self.process.is_alive()

    def upgrade(
        self, dsn: str, to: str | None, limits: Limits, cancel: threading.Event, key: str
    ) -> dict[str, Any]:
        """The target upgraded in the worker under the runner lock `key`; `cancel` set
        meanwhile cancels its statement."""
        self.conn.send({"dsn": dsn, "to": to, "limits": asdict(limits), "key": key})
        signalled = False
        while not self.conn.poll(POLL_S):
            if not self.process.is_alive():
                raise MigrationError("the Alembic worker process ended before it answered")
            if cancel.is_set() and not signalled and self.process.pid is not None:
                os.kill(self.process.pid, CANCEL)
                signalled = True
        answer = self.conn.recv()
        if answer[0] == "ok":
            return dict(answer[1])
        if answer[0] == "cancelled":
            self.close()
            raise Cancelled(str(answer[1]))
        _, _kind, message, code = answer
        error = QueueguardError(str(message))
        error.exit_code = int(code)
        raise error

    def close(self) -> None:
        with contextlib.suppress(OSError, ValueError):  # a worker already gone
            self.conn.send(None)
        self.conn.close()
        self.process.join(5)
        if self.process.is_alive():
            self.process.kill()
