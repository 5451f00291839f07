"""What the online-upgrade benchmark measures around each upgrade command: wall time, the
process's own peak RSS, WAL (the server's position, and the command's own backends), and the
command's JSON report.

Peak RSS is the child's VmHWM from /proc, sampled while it runs: its `ru_maxrss` (wait4,
RUSAGE_CHILDREN) starts from the parent's high-water mark at fork and exec on Linux, and this
parent holds the fleet's dispatch log. The command's own WAL comes from PostgreSQL's
per-backend statistics (`pg_stat_get_backend_wal`, 18+), which a backend publishes about once
a second: the last second before it disconnects may be missing, so it is a lower bound; the
server's LSN difference is an upper bound (every writer on the server counts).
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bench.common.commands import QUEUEGUARD
from queueguard.pg.connect import connection


def wal_lsn(dsn: str) -> str:
    with connection(dsn, autocommit=True) as conn:
        row = conn.execute("SELECT pg_current_wal_lsn()::text").fetchone()
    assert row is not None
    return str(row[0])


def wal_bytes(dsn: str, before: str, after: str) -> int:
    with connection(dsn, autocommit=True) as conn:
        row = conn.execute("SELECT pg_wal_lsn_diff(%s, %s)::bigint", (after, before)).fetchone()
    assert row is not None
    return int(row[0])


#: application_name of the upgrade commands' connections (online and offline runners)
UPGRADE_APPS = ("queueguard-online", "queueguard-upgrade")


def _hwm_kib(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:  # gone (a zombie has no memory left to report)
        pass
    return 0


class _Sampler(threading.Thread):
    """While the child runs: its VmHWM every 10 ms, its backends' WAL every 25 ms (a
    backend publishes its WAL figures when idle, at most once a second: a one-transaction
    command is caught only between its commit and its disconnect, if at all)."""

    def __init__(self, pid: int, dsn: str) -> None:
        super().__init__(daemon=True)
        self.pid, self.dsn = pid, dsn
        self.peak_kib = 0
        self.wal: dict[int, int] = {}  # backend pid -> the largest wal_bytes seen
        self.done = threading.Event()

    def run(self) -> None:
        with connection(self.dsn, autocommit=True) as conn:
            last: float | None = None  # not sampled yet (monotonic's zero is arbitrary)
            while not self.done.is_set():
                self.peak_kib = max(self.peak_kib, _hwm_kib(self.pid))
                if last is None or time.monotonic() - last >= 0.025:
                    last = time.monotonic()
                    rows = conn.execute(
                        "SELECT a.pid, w.wal_bytes FROM pg_stat_activity a,"
                        " pg_stat_get_backend_wal(a.pid) w"
                        " WHERE a.datname = current_database() AND a.application_name = ANY(%s)",
                        (list(UPGRADE_APPS),),
                    ).fetchall()
                    for pid, written in rows:
                        self.wal[pid] = max(self.wal.get(pid, 0), int(written or 0))
                self.done.wait(0.01)


@dataclass(frozen=True)
class CommandRun:
    """One `queueguard upgrade … --json` process."""

    args: list[str]
    started: float  # monotonic
    wall_s: float
    peak_rss_mb: float
    wal_bytes: int  # the server's, over the command (every writer on the server counts)
    own_wal_bytes: int  # the command's own backends (the last second may be missing)
    report: dict[str, Any]

    def as_json(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "started"}


def upgrade_command(dsn: str, *args: str, started: Callable[[], None] | None = None) -> CommandRun:
    """Run `queueguard upgrade --dsn DSN ARGS --json` to its end; `started` is called right
    after the process is spawned (the offline side starts its clients then)."""
    argv = ["upgrade", "--dsn", dsn, *args, "--json"]
    before = wal_lsn(dsn)
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        begun = time.monotonic()
        proc = subprocess.Popen([QUEUEGUARD, *argv], stdout=out, stderr=err, text=True)
        sampler = _Sampler(proc.pid, dsn)
        sampler.start()
        if started is not None:
            started()
        _, status, _usage = os.wait4(proc.pid, 0)
        wall = time.monotonic() - begun
        sampler.done.set()
        sampler.join()
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    if proc.returncode != 0:
        raise RuntimeError(f"queueguard {' '.join(args)} failed ({proc.returncode}):\n{stderr}")
    return CommandRun(
        args=["upgrade", *args],  # never the DSN: it goes to the docs
        started=begun,
        wall_s=wall,
        peak_rss_mb=sampler.peak_kib / 1024,
        wal_bytes=wal_bytes(dsn, before, wal_lsn(dsn)),
        own_wal_bytes=sum(sampler.wal.values()),
        report=json.loads(stdout),
    )
