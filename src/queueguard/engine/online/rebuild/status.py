"""Where a rebuild in flight stands, in words, for `status --migrations` (read only; row
counts are the statistics' estimates)."""

from __future__ import annotations

from typing import Any

import psycopg

from queueguard.engine.online.choose import Form
from queueguard.engine.online.names import unqualified
from queueguard.engine.online.rebuild.catalog import Q


def phase(conn: psycopg.Connection[Any], form: Form) -> str:
    swapped, shadow, live, logged = conn.execute(
        Q["status"], {"name": unqualified(form.table), "table": form.table}
    ).fetchone() or (False, None, None, None)
    if swapped:
        return "swapped in: validating foreign keys, then dropping the old table"
    if shadow is None:
        return "not begun (or capturing): no shadow yet"
    total = f" of ~{max(live, 0):,}" if live is not None else ""
    return f"shadow ~{shadow:,}{total} rows, ~{logged or 0:,} changes logged to replay"
