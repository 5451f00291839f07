"""Seeds in the released shapes (hand-built rows, plain SQL) and the 004 oracle."""

from __future__ import annotations

import copy
import uuid
from collections import defaultdict
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from queueguard.core import keys

from .support import UNVERSIONED, execute


def payload(
    run_id: str, workflow_id: str, kind: str = "workflow", event: int = 1
) -> dict[str, Any]:
    """A task's data in the shape it has had since 001."""
    return {
        "task": {
            "namespace": "ns",
            "workflowId": workflow_id,
            "runId": run_id,
            "kind": kind,
            "scheduledEventId": event,
            "attempt": 1,
        },
        "enqueuedAt": "2024-05-01T12:00:00Z",
    }


RUN_AUTO = str(uuid.UUID(int=0xA0))
RUN_PINNED = str(uuid.UUID(int=0xB0))
RUN_PLAIN = str(uuid.UUID(int=0xC0))
RUN_DONE = str(uuid.UUID(int=0xD0))
RUN_UNKNOWN = str(uuid.UUID(int=0xE0))  # never inserted into executions
EXECUTIONS = [
    (RUN_AUTO, "ns", "wf-auto", "running", "auto_upgrade", "dep.v2"),
    (RUN_PINNED, "ns", "wf-pinned", "running", "pinned", "dep.v1"),
    (RUN_PLAIN, "ns", "wf-plain", "running", "unversioned", None),
    (RUN_DONE, "ns", "wf-done", "completed", "auto_upgrade", "dep.v1"),
]
DIRECTIVES = {run: {"behavior": b, "deploymentVersion": d} for run, _, _, _, b, d in EXECUTIONS}

HOSTILE_NS = "ns/one @%' x"
HOSTILE_TQ = "queue ünï 日本 /@%"
#: v0.1/v0.2 spool components: (namespace, task_queue, task_type, partition, version, run).
SPOOL_QUEUES = [
    ("ns", "orders", "workflow", 0, "", RUN_PLAIN),
    ("ns", "orders", "workflow", 0, "auto", RUN_AUTO),
    ("ns", "orders", "activity", 0, "auto", RUN_AUTO),
    ("ns", "orders", "workflow", 0, "dep.v1", RUN_PINNED),
    ("ns", "orders", "workflow", 1, "", RUN_UNKNOWN),
    (HOSTILE_NS, HOSTILE_TQ, "activity", 10, "", RUN_PLAIN),
    (HOSTILE_NS, HOSTILE_TQ, "activity", 10, "auto", RUN_DONE),
    (HOSTILE_NS, HOSTILE_TQ, "workflow", 7, "dep @/%.1", "not-a-uuid"),
    ("%41", "a%2fb", "workflow", 0, "", RUN_PLAIN),
]


def seed_executions(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn, conn.cursor() as cur:
        cur.executemany(
            "INSERT INTO executions (run_id, namespace, workflow_id, status, "
            "versioning_behavior, deployment_version) VALUES (%s, %s, %s, %s, %s, %s)",
            EXECUTIONS,
        )
        cur.executemany(
            "INSERT INTO scheduled_tasks (run_id, scheduled_event_id, kind, started_at) "
            "VALUES (%s, %s, %s, %s)",
            [(RUN_AUTO, 1, "workflow", None), (RUN_DONE, 1, "workflow", "2024-05-01")],
        )


def seed_spool(dsn: str, rounds: int = 4) -> None:
    """v0.1/v0.2 spool rows, interleaved across queues; created_at runs backwards in places,
    so only delivery_id can give 003 its order."""
    values = []
    for r in range(rounds):
        for q, (ns, tq, ttype, part, version, run) in enumerate(SPOOL_QUEUES):
            wf = f"wf-{q}-{r}"
            created = f"2024-05-01T12:{59 - r * 7 - q % 3:02d}:00Z"
            values.append((ns, tq, ttype, part, version, Jsonb(payload(run, wf, ttype)), created))
    with psycopg.connect(dsn, autocommit=True) as conn, conn.cursor() as cur:
        cur.executemany(
            "INSERT INTO tasks (namespace, task_queue, task_type, partition, version, data, "
            "created_at) VALUES (%s, %s, %s, %s, %s, %s, %s)",
            values,
        )


def seed_user_data(dsn: str) -> None:
    execute(
        dsn,
        "INSERT INTO task_queue_user_data (namespace, task_queue, version, data) VALUES "
        "('ns', 'orders', 3, '{\"versioning\": {\"current\": \"dep.v2\"}}'), "
        "(%s, %s, 1, '{}')",
        (HOSTILE_NS, HOSTILE_TQ),
    )


# A v0.3 scenario for 004: queue key -> metadata, and task rows.
META = ("namespace", "task_queue", "task_type", "partition", "version")
META += ("range_id", "ack_level", "last_task_id")


def q3(ns: str, tq: str, ttype: str, part: int, version: str, rng: int, ack: int, last: int) -> Any:
    key = keys.legacy_queue(ns, tq, ttype, part, version)
    return key, dict(zip(META, (ns, tq, ttype, part, version, rng, ack, last), strict=True))


DEFAULT = q3("ns", "orders", "workflow", 0, "", 3, 4, 6)  # stale: rows up to 8
AUTO = q3("ns", "orders", "workflow", 0, "auto", 2, 4, 7)  # rows 3, 4, 7 (two at/below ack)
PINNED = q3("ns", "orders", "workflow", 0, "dep.v1", 5, 0, 2)
ACT_AUTO = q3("ns", "orders", "activity", 2, "auto", 1, 0, 3)  # no default destination yet
IDLE_AUTO = q3("ns", "idle", "workflow", 0, "auto", 4, 5, 5)  # drained already: no rows
STALE_AUTO = q3("ns", "stale", "workflow", 1, "auto", 1, 0, 2)  # rows 1..4 above last
KEPT_STALE = q3("ns", "kept", "workflow", 0, "", 9, 0, 1)  # rows 1..3 above last
HOSTILE_DEFAULT = q3(HOSTILE_NS, HOSTILE_TQ, "workflow", 3, "", 1, 0, 2)
HOSTILE_AUTO = q3(HOSTILE_NS, HOSTILE_TQ, "workflow", 3, "auto", 1, 1, 2)
HOSTILE_PINNED = q3(HOSTILE_NS, HOSTILE_TQ, "workflow", 3, "dep @/%.1", 1, 0, 1)
V3_SCENARIO = [DEFAULT, AUTO, PINNED, ACT_AUTO, IDLE_AUTO, STALE_AUTO, KEPT_STALE]
V3_SCENARIO += [HOSTILE_DEFAULT, HOSTILE_AUTO, HOSTILE_PINNED]
V3_QUEUES = dict(V3_SCENARIO)
_V3_ROW_SPEC = [
    (DEFAULT[0], [5, 6, 7, 8], [RUN_PLAIN, RUN_UNKNOWN, RUN_PLAIN, "not-a-uuid"]),
    (AUTO[0], [3, 4, 7], [RUN_AUTO, RUN_DONE, RUN_AUTO.upper()]),
    (PINNED[0], [1, 2], [RUN_PINNED, RUN_PINNED]),
    (ACT_AUTO[0], [1, 2, 3], [RUN_AUTO, RUN_UNKNOWN, RUN_AUTO]),
    (STALE_AUTO[0], [1, 2, 3, 4], [RUN_AUTO] * 4),
    (KEPT_STALE[0], [1, 2, 3], [RUN_PLAIN] * 3),
    (HOSTILE_DEFAULT[0], [1, 2], [RUN_PLAIN, RUN_PLAIN]),
    (HOSTILE_AUTO[0], [2, 9], [RUN_DONE, RUN_AUTO]),
    (HOSTILE_PINNED[0], [1], [RUN_PINNED]),
]
#: (queue, task_id, data, created_at): every payload distinct, created_at not in id order.
V3_ROWS = [
    (key, tid, payload(run, f"wf-{n}-{tid}"), f"2024-05-0{1 + (tid * 7 + n) % 9}T00:00:00+00:00")
    for n, (key, ids, runs) in enumerate(_V3_ROW_SPEC)
    for tid, run in zip(ids, runs, strict=True)
]


def seed_v3(dsn: str) -> None:
    """The 004 scenario in the v0.3 shape (the database must be at 003)."""
    seed_executions(dsn)
    with psycopg.connect(dsn, autocommit=True) as conn, conn.cursor() as cur:
        cur.executemany(
            "INSERT INTO task_queues (physical_queue, namespace, task_queue, task_type, "
            "partition, version, range_id, ack_level, last_task_id) VALUES "
            "(%s, %s, %s, %s, %s, %s, %s, %s, %s)",
            [(k, *m.values()) for k, m in V3_QUEUES.items()],
        )
        cur.executemany(
            "INSERT INTO tasks (physical_queue, task_id, data, created_at) VALUES (%s, %s, %s, %s)",
            [(k, tid, Jsonb(data), created) for k, tid, data, created in V3_ROWS],
        )


def reference_004(
    queues: dict[str, dict[str, Any]], task_rows: list[tuple[str, int, Any, str]]
) -> tuple[dict[str, dict[str, Any]], dict[tuple[str, int], tuple[Any, str]]]:
    """004's steps 1–4 (docs/schema-history.md) in plain Python: the independent oracle."""
    queues = copy.deepcopy(queues)

    def stamp(data: Any) -> Any:
        data = copy.deepcopy(data)
        data["task"]["versionDirective"] = DIRECTIVES.get(data["task"]["runId"], UNVERSIONED)
        return data

    by_queue: dict[str, list[tuple[int, Any, str]]] = defaultdict(list)
    for key, tid, data, created in task_rows:
        by_queue[key].append((tid, data, created))
    result = {
        (key, tid): (stamp(data), created)
        for key, items in by_queue.items()
        if queues[key]["version"] != "auto"
        for tid, data, created in items
    }
    for key, items in sorted(by_queue.items()):
        source = queues[key]
        if source["version"] != "auto":
            continue
        dest = key.removesuffix("@auto")
        if dest not in queues:
            queues[dest] = {**source, "version": "", "range_id": 0, "ack_level": 0}
            queues[dest]["last_task_id"] = 0
        base = max([queues[dest]["last_task_id"]] + [t for k, t in result if k == dest])
        for n, (_, data, created) in enumerate(sorted(items, key=lambda i: i[0]), start=1):
            result[(dest, base + n)] = (stamp(data), created)
        queues[dest]["last_task_id"] = base + len(items)
        drained = max(source["last_task_id"], max(i[0] for i in items))
        source["last_task_id"] = source["ack_level"] = drained
    for key, tid in result:
        queues[key]["last_task_id"] = max(queues[key]["last_task_id"], tid)
    for meta in queues.values():
        meta["range_id"] += 1
    return queues, result


def read_v4(dsn: str) -> tuple[dict[str, dict[str, Any]], dict[tuple[str, int], tuple[Any, str]]]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SET TIME ZONE 'UTC'")
        queues = {
            r[0]: dict(zip(META, r[1:], strict=True))
            for r in conn.execute(f"SELECT physical_queue, {', '.join(META)} FROM task_queues")
        }
        task_rows = {
            (r[0], r[1]): (r[2], r[3].isoformat())
            for r in conn.execute("SELECT physical_queue, task_id, data, created_at FROM tasks")
        }
    return queues, task_rows
