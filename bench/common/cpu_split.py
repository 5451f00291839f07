"""Where a machine's cores went while a case ran: the CPU seconds of a local PostgreSQL
server's processes by kind — the bench's writers, the upgrade's sessions (queueguard's, its
pg_dump's and psql's) with their parallel workers, the server's I/O workers, autovacuum, the
rest — read from /proc (utime + stime) for every process `pg_stat_activity` lists, once a
second, each second's use kept with its time so a caller can split it by phase.

A process first seen after the sampler started counts from its birth (a parallel worker
lives a few seconds); one that ends between two reads loses at most its last second. Only
for a server on this machine: a process /proc does not show is not counted."""

from __future__ import annotations

import os
import time
from collections.abc import Sequence

import psycopg

from bench.common.sampler import Sampler

WRITERS, UPGRADE, IO, AUTOVACUUM, OTHER = (
    "writers", "queueguard", "I/O workers", "autovacuum", "other"
)  # fmt: skip
KINDS = (WRITERS, UPGRADE, IO, AUTOVACUUM, OTHER)
_TICK = os.sysconf("SC_CLK_TCK")
_QUERY = (
    "SELECT a.pid, coalesce(a.application_name, ''), coalesce(a.backend_type, ''), "
    "coalesce(l.application_name, '') FROM pg_stat_activity a "
    "LEFT JOIN pg_stat_activity l ON l.pid = a.leader_pid AND a.leader_pid <> a.pid"
)


def kind_of(application: str, backend_type: str, leader_application: str, writers: str) -> str:
    """A process's kind. A session is the writers', the bench's own (`bench-…`), or else
    the upgrade's (queueguard's sessions and the pg_dump and psql it runs: nothing else
    connects during a case); a parallel worker is its leader's."""
    if backend_type in ("client backend", "parallel worker"):
        name = leader_application or application
        if name == writers:
            return WRITERS
        return OTHER if name.startswith("bench-") else UPGRADE
    if backend_type == "io worker":
        return IO
    if backend_type.startswith("autovacuum"):
        return AUTOVACUUM
    return OTHER


def _stat(pid: int) -> tuple[float, int] | None:
    """(CPU seconds used, start time in ticks since boot) of a process, None when gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / _TICK, int(fields[19])


def _now_ticks() -> int:
    with open("/proc/uptime") as f:
        return int(float(f.read().split()[0]) * _TICK)


class CpuSplit(Sampler):
    """Samples until `stop()`; `between(start, end)` the seconds of each kind in a window
    (times from `time.perf_counter()`)."""

    def __init__(self, dsn: str, writers: str = "bench-writer", interval_s: float = 1.0) -> None:
        self.dsn, self.writers, self.interval_s = dsn, writers, interval_s
        #: (when, {kind: CPU seconds since the read before})
        self.samples: list[tuple[float, dict[str, float]]] = []
        super().__init__()

    def between(self, start: float, end: float) -> dict[str, float]:
        spent = dict.fromkeys(KINDS, 0.0)
        for when, used in self.samples:
            if start < when <= end:
                for kind, seconds in used.items():
                    spent[kind] += seconds
        return {kind: round(seconds, 1) for kind, seconds in spent.items()}

    def _run(self) -> None:
        began = _now_ticks()
        seen: dict[int, float] = {}
        with psycopg.connect(self.dsn, autocommit=True, application_name="bench-cpu") as conn:
            while not self._stop.is_set():
                used = dict.fromkeys(KINDS, 0.0)
                for pid, app, backend, leader in conn.execute(_QUERY).fetchall():
                    stat = _stat(pid)
                    if stat is None:
                        continue
                    cpu, started = stat
                    # first seen: from its birth if it began after the sampler, else from now
                    before = seen.get(pid, 0.0 if started >= began else cpu)
                    seen[pid] = cpu
                    used[kind_of(app, backend, leader, self.writers)] += cpu - before
                self.samples.append((time.perf_counter(), used))
                self._stop.wait(self.interval_s)


def shares(spent: dict[str, float], kinds: Sequence[str] = KINDS) -> str:
    """`writers 334 s (59 %), …`: each kind's seconds and its part of the total."""
    total = sum(spent.get(k, 0.0) for k in kinds) or 1.0
    return ", ".join(f"{k} {spent.get(k, 0.0):.0f} s ({100 * spent.get(k, 0.0) / total:.0f} %)"
                     for k in kinds)  # fmt: skip
