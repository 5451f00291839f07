"""Databases at 003 for the online upgrade tests: generated data with hostile names."""

from __future__ import annotations

import json
import random
import uuid
from typing import Any

from queueguard.pg.connect import connection
from queueguard.queue_schema.legacy.workers import LegacyQueue
from queueguard.queue_schema.runner import upgrade
from queueguard.queue_schema.state import export_database

HOSTILE = ["orders", "a/b", "x@y", "100%", "it's", "ünïcødé 🚀", "sp ace", "%41", "ns.dotted"]


def seed_hostile(dsn: str, seed: int, queues: int = 8) -> None:
    """A 003 database: queues with hostile names in every shape 004 handles (default, pinned
    and legacy @auto queues with or without their default sibling, stale counters, rows at or
    below the ack level), History for most runs, unknown runs and non-uuid run ids."""
    rnd = random.Random(seed)
    upgrade(dsn, to="003", progress=False)
    with connection(dsn) as conn:
        for n in range(queues):
            ns, family = rnd.choice(HOSTILE), f"{rnd.choice(HOSTILE)}-{n}"
            partition = rnd.randint(0, 3)
            versions = rnd.choice([["", "auto"], ["auto"], ["", "dep.1"], [""], ["auto", "d.2"]])
            for version in versions:
                queue = LegacyQueue(ns, family, rnd.choice(["workflow", "activity"]), partition)
                queue = LegacyQueue(ns, family, queue.task_type, partition, version)
                ids = sorted(rnd.sample(range(1, 40), rnd.randint(0, 9)))
                last = max([rnd.randint(0, 40), *ids]) - (3 if ids and rnd.random() < 0.3 else 0)
                last = max(last, 0)
                ack = rnd.randint(0, last)
                conn.execute(
                    "INSERT INTO task_queues VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
                    (
                        queue.key,
                        ns,
                        family,
                        queue.task_type,
                        partition,
                        version,
                        rnd.randint(0, 4),
                        ack,
                        last,
                    ),
                )
                for task_id in ids:
                    run = _run(conn, rnd, ns, version)
                    data = {
                        "task": {
                            "namespace": ns,
                            "workflowId": f"wf-{task_id}",
                            "runId": run,
                            "kind": queue.task_type,
                            "scheduledEventId": task_id,
                            "attempt": 1,
                        },
                        "enqueuedAt": "2026-01-01T00:00:00Z",
                    }
                    conn.execute(
                        "INSERT INTO tasks (physical_queue, task_id, data) VALUES (%s, %s, %s)",
                        (queue.key, task_id, json.dumps(data)),
                    )
        conn.commit()


def _run(conn: Any, rnd: random.Random, ns: str, version: str) -> str:
    roll = rnd.random()
    if roll < 0.1:
        return "not-a-uuid"
    run = str(uuid.UUID(int=rnd.getrandbits(128)))
    if roll < 0.2:
        return run  # unknown to History
    behavior = {"auto": "auto_upgrade", "": "unversioned"}.get(version, "pinned")
    conn.execute(
        "INSERT INTO executions (run_id, namespace, workflow_id, status, versioning_behavior, "
        "deployment_version) VALUES (%s, %s, %s, 'running', %s, %s)",
        (run, ns, f"wf-{run[:8]}", behavior, version if behavior == "pinned" else None),
    )
    return run


def rows(dsn: str, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    with connection(dsn) as conn:
        return conn.execute(sql, params).fetchall()


def export(dsn: str) -> dict[str, Any]:
    with connection(dsn) as conn:
        return export_database(conn)
