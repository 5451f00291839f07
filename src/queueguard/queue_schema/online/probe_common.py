"""What the checks of the online probe (`probe`) share: the probe's namespace, queues and
knobs, another schema the online path must not mistake for its own, and waiting for what
happens in a moment.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from queueguard.core.keys import PhysicalQueue
from queueguard.pg.connect import connection
from queueguard.queue_schema.legacy.workers import LegacyQueue
from queueguard.queue_schema.online.session import Knobs

NAMESPACE = "queueguard-verify"
KNOBS = Knobs(batch_size=2, max_lag_s=None, lease_s=30, wait_s=0, retries=0)
HELD = PhysicalQueue(NAMESPACE, "held-by-v04", "workflow", 0)
FREE = LegacyQueue(NAMESPACE, "free")
CLOSING = PhysicalQueue(NAMESPACE, "loaded-while-closing", "workflow", 0)
Export = Callable[[str], dict[str, Any]]


def quiet(_message: object) -> None:
    pass


#: how long to wait for something that happens in a moment on an idle machine (a closed
#: backend leaving pg_stat_activity, a build showing in the progress view): generous, since
#: on a loaded one a moment can last seconds, and a bound that ran out would fail a correct
#: migration set; waiting costs nothing when it comes at once
MOMENT_S = 60.0


def wait_gone(dsn: str, application_name: str, timeout_s: float = MOMENT_S) -> None:
    """A closed connection's backend leaves pg_stat_activity a moment later: wait for it (in
    this database: other runs on the server name their hosts alike)."""
    deadline = time.monotonic() + timeout_s
    with connection(dsn, autocommit=True) as conn:
        while time.monotonic() < deadline:
            found = conn.execute(
                "SELECT 1 FROM pg_stat_activity "
                "WHERE application_name = %s AND datname = current_database()",
                (application_name,),
            ).fetchone()
            if found is None:
                return
            time.sleep(0.02)


def range_of(dsn: str, key: str) -> int | None:
    with connection(dsn) as conn:
        row = conn.execute(
            "SELECT range_id FROM task_queues WHERE physical_queue = %s", (key,)
        ).fetchone()
    return int(row[0]) if row else None


#: another schema of the same database, with what the online path must not mistake for its
#: own: a table with a `protocol4_range` column, an index being built concurrently
OTHER = "queueguard_verify_other"


def other_schema(dsn: str) -> None:
    with connection(dsn) as conn:
        conn.execute(f"CREATE SCHEMA {OTHER}")
        conn.execute(f"CREATE TABLE {OTHER}.queues (id bigint PRIMARY KEY, protocol4_range bigint)")
        conn.execute(f"INSERT INTO {OTHER}.queues VALUES (1, 1), (2, NULL)")
        conn.commit()


def drop_other_schema(dsn: str) -> None:
    with connection(dsn) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {OTHER} CASCADE")
        conn.commit()
