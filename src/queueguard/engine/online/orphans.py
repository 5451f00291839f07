"""A killed runner's backends. SIGKILL ends the runner, not its statement: PostgreSQL's
backend goes on building the index or copying the batch (holding the runner lock) until it
next writes to the dead client. A rerun on the same host ends the backends whose runner
process is gone (their application_name carries its pid and host); any other — a live
second runner, or one on another host — it waits for, as the runner lock makes it."""

from __future__ import annotations

import os
import re
import socket
import time
from collections.abc import Callable

from queueguard.engine.apply.session import APPLICATION_NAME
from queueguard.pg.connect import connect
from queueguard.pg.sqlfiles import queries

Q = queries("queueguard.engine.online", "orphans.sql")
_NAME = re.compile(rf"^{APPLICATION_NAME} online (?P<pid>\d+)@(?P<host>.+)$")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def orphaned(application_name: str, host: str | None = None) -> bool:
    """Whether the runner that named a backend so is dead (known only on its own host)."""
    found = _NAME.match(application_name)
    if found is None or found["host"] != (host or socket.gethostname())[: len(found["host"])]:
        return False
    return not _alive(int(found["pid"]))


def settle(dsn: str, tell: Callable[[str], None], wait_s: float = 2.0) -> list[int]:
    """End the backends of killed runners on this host and wait briefly for them to go;
    the pids ended."""
    ended: list[int] = []
    with connect(dsn, application_name=f"{APPLICATION_NAME} settle", autocommit=True) as conn:
        rows = conn.execute(Q["runner_backends"], {"prefix": f"{APPLICATION_NAME} online %"})
        for pid, name, state, query in rows.fetchall():
            if orphaned(name):
                conn.execute(Q["terminate"], {"pid": pid})
                ended.append(pid)
                tell(
                    f"ended backend {pid} of a killed runner ({name}; {state}): "
                    f"{' '.join(str(query).split())[:100]}"
                )
        deadline = time.monotonic() + wait_s
        while ended and time.monotonic() < deadline:
            left = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE pid = ANY(%s)", (ended,)
            ).fetchone()
            if not left or not left[0]:
                break
            time.sleep(0.05)
    return ended
