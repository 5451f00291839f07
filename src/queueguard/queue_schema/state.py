"""A PostgreSQL database's whole queue state as a snapshot document, and back.

The document is the snapshot format (docs/interfaces.md "Memory snapshots"), so a memory store, a
database and a golden fixture are compared the same way: as normalised documents.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import psycopg
from psycopg.rows import TupleRow
from psycopg.types.json import Jsonb

from queueguard.core.keys import PhysicalQueue, decode
from queueguard.core.store import Execution
from queueguard.errors import QueueguardError
from queueguard.pg.sqlfiles import queries

Q = queries("queueguard.queue_schema", "state.sql")
Doc = dict[str, Any]
Conn = psycopg.Connection[TupleRow]


def export_database(conn: Conn, format_version: int = 4) -> Doc:
    """Read the state of a database at revision 003 or later (read-only)."""
    conn.execute("SET TIME ZONE 'UTC'")
    tasks: dict[str, list[Doc]] = defaultdict(list)
    for key, task_id, data in conn.execute(Q["tasks"]):
        tasks[key].append({"taskId": task_id, "data": data})
    queues = []
    for key, range_id, ack, last in conn.execute(Q["queues"]):
        queues.append(
            {
                "physicalQueue": key,
                "rangeId": range_id,
                "ackLevel": ack,
                "lastTaskId": last,
                "tasks": tasks.pop(key, []),
            }
        )
    for key, rows in tasks.items():  # rows without a metadata row stay visible in diffs
        queues.append(
            {
                "physicalQueue": key,
                "rangeId": None,
                "ackLevel": None,
                "lastTaskId": None,
                "tasks": rows,
            }
        )
    queues.sort(key=lambda q: q["physicalQueue"])
    protocol = conn.execute(Q["protocol"]).fetchall()
    return {
        "formatVersion": format_version,
        "queues": queues,
        "userData": [
            {"namespace": ns, "taskQueue": tq, "version": v, "data": d}
            for ns, tq, v, d in conn.execute(Q["user_data"])
        ],
        "history": {
            "executions": [Execution(*row).as_record() for row in conn.execute(Q["executions"])],
            "scheduledTasks": [
                {"runId": r, "scheduledEventId": ev, "kind": k, "startedAt": s}
                for r, ev, k, s in conn.execute(Q["scheduled_tasks"])
            ],
        },
        "protocol": (
            {"min": protocol[0][0], "max": protocol[0][1]} if len(protocol) == 1 else None
        ),
    }


def _components(key: str) -> tuple[str, str, str, int, str]:
    decoded = decode(key, allow_auto=True)
    if isinstance(decoded, PhysicalQueue):
        return (
            decoded.namespace,
            decoded.task_queue,
            decoded.task_type,
            decoded.partition,
            decoded.version,
        )
    return decoded


def is_empty(conn: Conn) -> bool:
    row = conn.execute(Q["is_empty"]).fetchone()
    return bool(row and row[0])


def load_document(conn: Conn, doc: Doc) -> None:
    """Insert a validated document into an empty database at revision 003 or 004.

    Runs in the caller's transaction: on any error nothing is written.
    """
    if not is_empty(conn):
        raise QueueguardError("the target database is not empty; refusing to import into it")
    with conn.cursor() as cur:
        with cur.copy(Q["copy_executions"]) as copy:
            for e in doc["history"]["executions"]:
                copy.write_row(Execution.from_record(e).as_row())
        with cur.copy(Q["copy_scheduled_tasks"]) as copy:
            for s in doc["history"]["scheduledTasks"]:
                copy.write_row((s["runId"], s["scheduledEventId"], s["kind"], s.get("startedAt")))
        with cur.copy(Q["copy_user_data"]) as copy:
            for u in doc["userData"]:
                copy.write_row((u["namespace"], u["taskQueue"], u["version"], Jsonb(u["data"])))
        with cur.copy(Q["copy_queues"]) as copy:
            for q in doc["queues"]:
                copy.write_row(
                    (
                        q["physicalQueue"],
                        *_components(q["physicalQueue"]),
                        q["rangeId"],
                        q["ackLevel"],
                        q["lastTaskId"],
                    )
                )
        with cur.copy(Q["copy_tasks"]) as copy:
            for q in doc["queues"]:
                for t in q["tasks"]:
                    copy.write_row((q["physicalQueue"], t["taskId"], Jsonb(t["data"])))
        cur.execute(Q["set_protocol"], doc["protocol"])
