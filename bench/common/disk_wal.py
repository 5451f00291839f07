"""What a statement wrote, measured around it on a server where nothing else runs: the WAL
(the server's insert position before and after) and the peak extra disk (the database's
size, sampled, above where it started)."""

from __future__ import annotations

import time
from typing import Any

import psycopg

from bench.common.sampler import Sampler


class DiskPeak(Sampler):
    """The database's size, sampled: its peak above where it started."""

    def __init__(self, dsn: str, interval_s: float = 0.1) -> None:
        self.dsn, self.interval_s = dsn, interval_s
        self.start_bytes = self.peak_bytes = 0
        super().__init__()

    def start(self) -> None:
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            self.start_bytes = self.peak_bytes = self._size(conn)
        super().start()

    def extra(self) -> int:
        """Stopped: the peak above the start, in bytes."""
        self.stop()
        return self.peak_bytes - self.start_bytes

    @staticmethod
    def _size(conn: psycopg.Connection[Any]) -> int:
        row = conn.execute("SELECT pg_database_size(current_database())").fetchone()
        return int(row[0]) if row else 0

    def _run(self) -> None:
        with psycopg.connect(self.dsn, autocommit=True, application_name="bench-disk") as c:
            while not self._stop.is_set():
                self.peak_bytes = max(self.peak_bytes, self._size(c))
                time.sleep(self.interval_s)


def wal_position(dsn: str) -> str:
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT pg_current_wal_lsn()::text").fetchone()
        return str(row[0]) if row else "0/0"


def wal_since(dsn: str, lsn: str) -> int:
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), %s)", (lsn,)).fetchone()
        return int(row[0]) if row else 0
