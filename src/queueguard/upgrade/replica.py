"""Standby awareness: commands that write refuse a hot standby before touching anything
(naming its primary where visible); preflight says it ran on one and how far behind it is."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from queueguard.errors import StandbyTarget
from queueguard.pg.sqlfiles import queries

Q = queries("queueguard.upgrade", "replica.sql")


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
