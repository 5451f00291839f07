"""Where a command's connection really lands: a hot standby, or a pooler in between.

Commands that write refuse a hot standby before touching anything (naming its primary where
visible); preflight says it ran on one and how far behind it is. Through a connection pooler
(PgBouncer) an idle host holds no server connection, so the older-host check cannot see it:
it is detected where the ports differ (or the operator says `--pooled`), and reported, since
the fence — not the check — is what guarantees old hosts fail.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from queueguard.errors import StandbyTarget
from queueguard.pg.sqlfiles import queries

Q = queries("queueguard.upgrade", "topology.sql")


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


def replica_lag_s(cursor: Any) -> float:
    """On a primary: how far its slowest streaming standby is behind, in seconds."""
    cursor.execute(Q["replica_lag"])
    return float(cursor.fetchone()[0])
