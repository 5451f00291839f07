"""What a run really wrote on a database (`rehearse`, on its copy): the WAL, by the server's
insert position around the run (every session's: an upper bound, server-wide, as the copy
shares its server), and the peak extra disk, the database's size sampled while it runs
above its size at the start (new relation files kept until their commit; the sorts'
temporary files and the WAL itself are not in it)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from queueguard.engine.plan.observe import Q
from queueguard.pg.connect import connection

#: how often the database's size is read while the run goes on
SAMPLE_S = 0.1


@dataclass
class Written:
    wal_bytes: int = 0
    peak_extra_disk_bytes: int = 0


@contextmanager
def measured(dsn: str) -> Iterator[Written]:
    """The block's WAL and peak extra disk on the database at `dsn`."""
    found = Written()
    done = threading.Event()
    with connection(dsn, autocommit=True) as conn:
        wal = int(conn.execute(Q["server_wal"]).fetchone()[0])  # type: ignore[index]
        start = int(conn.execute(Q["database_bytes"]).fetchone()[0])  # type: ignore[index]

        def sample() -> None:
            with connection(dsn, autocommit=True) as watcher:
                while True:
                    size = int(watcher.execute(Q["database_bytes"]).fetchone()[0])  # type: ignore[index]
                    found.peak_extra_disk_bytes = max(found.peak_extra_disk_bytes, size - start)
                    if done.wait(SAMPLE_S):
                        return

        sampler = threading.Thread(target=sample, name="queueguard-disk", daemon=True)
        sampler.start()
        try:
            yield found
        finally:
            done.set()
            sampler.join()
            found.wal_bytes = int(conn.execute(Q["server_wal"]).fetchone()[0]) - wal  # type: ignore[index]
