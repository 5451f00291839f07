"""Where a command's connection really lands: a hot standby, or a pooler in between.

Commands that write refuse a hot standby before touching anything (naming its primary where
visible); preflight says it ran on one and how far behind it is. Through a connection pooler
(PgBouncer) an idle host holds no server connection, so the older-host check cannot see it:
it is detected where the ports differ (or the operator says `--pooled`), and reported, since
the fence — not the check — is what guarantees old hosts fail.
"""

from __future__ import annotations

import re
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from queueguard.errors import StandbyTarget
from queueguard.pg.sqlfiles import queries

Q = queries("queueguard.engine", "topology.sql")


@dataclass(frozen=True)
class Standby:
    primary: str  # host:port of the primary, '' when not visible to this role
    replay_lag_s: float | None
    replay_lag_bytes: int | None


def standby(cursor: Any) -> Standby | None:
    """The standby facts of the server behind `cursor` (a DB-API cursor), None on a primary."""
    cursor.execute(Q["standby"])
    in_recovery, conninfo, lag_s, lag_bytes = cursor.fetchone()
    if not in_recovery:
        return None
    return Standby(primary_of(conninfo), lag_s, lag_bytes)


def primary_of(conninfo: str | None) -> str:
    """host:port of the primary in a walreceiver conninfo string ('' if not visible)."""
    if not conninfo:
        return ""
    found = dict(re.findall(r"(\w+)=('(?:[^']|'')*'|\S+)", conninfo))
    host, port = found.get("host", "").strip("'"), found.get("port", "").strip("'")
    return f"{host}:{port}" if host else ""


def refuse_standby(cursor: Any, action: str) -> None:
    """Raise StandbyTarget when the server is a hot standby: `action` must go to the primary."""
    found = standby(cursor)
    if found is not None:
        where = f" ({found.primary})" if found.primary else ""
        raise StandbyTarget(
            f"the target is a hot standby (in recovery, read-only): {action} the primary{where}"
        )


def pooler(connection: Any, cursor: Any, declared: bool = False) -> str | None:
    """Why the connection seems to go through a pooler or proxy, or None.

    A client connected to port X of a server that listens on port Y != X talks to something
    in between (PgBouncer listens on 6432, PostgreSQL on 5432). `declared` is the operator's
    `--pooled`.
    """
    if declared:
        return "--pooled: the operator says this connection goes through a pooler"
    cursor.execute(Q["server_port"])
    row = cursor.fetchone()
    server_port = str(row[0]) if row else ""
    client_port = str(connection.info.port)
    if server_port and client_port and server_port != client_port:
        return f"connected to port {client_port}, the server listens on {server_port}"
    return None


#: What the older-host check cannot see through a pooler.
POOLER_BLIND = (
    "the older-host check sees only hosts that hold a server connection now: through a "
    "pooler an idle host is invisible; the fence (range_id + 1, protocol [4, 4]) is what "
    "makes every older host fail, seen or not"
)


@dataclass(frozen=True)
class Lag:
    """What a `LagWatch` read: the slowest standby's lag, and what is worth saying."""

    seconds: float
    standbys: int
    #: WAL held back by inactive replication slots (a disconnected standby keeping one)
    retained_bytes: float = 0.0
    slots: str = ""


@dataclass
class LagWatch:
    """How far a primary's slowest streaming standby is behind, in seconds — measured as well
    as reported. `pg_stat_replication.replay_lag` is what the standby's feedback lets the
    primary compute, and is null once the standby looks idle; the watch does not rely on it
    alone: it remembers when it saw the primary's WAL at each position, and a standby is at
    least as far behind as the oldest of those it has not replayed (its replay paused, or
    stuck behind a conflict), less the age of the standby's last report (a quiet standby
    reports its replay position only every `wal_receiver_status_interval`). Physical
    standbys only: a logical walsender replays nothing. The resolution is how often it is
    read (between batches)."""

    seen: deque[tuple[float, float]] = field(default_factory=lambda: deque(maxlen=100_000))
    #: what its reader has said once (no standby, a slot holding WAL back)
    said: set[str] = field(default_factory=set)

    def read(self, cursor: Any) -> Lag:
        cursor.execute(Q["replica_positions"])
        at, replayed, reported, standbys, report_age, retained, slots = cursor.fetchone()
        now = time.monotonic()
        self.seen.append((now, float(at)))
        measured = 0.0
        if replayed is not None:
            # forget what every standby has replayed, keeping the newest such position
            while len(self.seen) > 1 and self.seen[1][1] <= replayed:
                self.seen.popleft()
            ahead = [t for t, lsn in self.seen if lsn > replayed]
            # the replay position is as old as the standby's last report (a quiet standby
            # reports every wal_receiver_status_interval): behind by at least the rest
            measured = max(0.0, now - ahead[0] - float(report_age)) if ahead else 0.0
        return Lag(max(float(reported), measured), int(standbys), float(retained), slots or "")
