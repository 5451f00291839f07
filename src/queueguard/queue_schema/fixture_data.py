"""What the golden fixtures hold: History, the v0.1/v0.2 spool rows, the v0.3 queues, user
data, and the SQL that fills a database of each released revision with them (written out by
`queueguard.queue_schema.fixturegen`, the only writer of the fixtures)."""

from __future__ import annotations

import json
import uuid
from typing import Any

from queueguard.core.keys import legacy_queue

NS = uuid.UUID("6f1c9d2e-0000-4000-8000-000000000000")
EPOCH = "2026-01-01 00:00:00+00"

# Hostile names: every character class the key encoding must keep injective.
HOSTILE_NS = "team/α @ 100% 'quoted'"
HOSTILE_TQ = "it's/q@x%y ünïcødé 🚀"


def run_id(name: str) -> str:
    return str(uuid.uuid5(NS, name))


# History shared by every fixture: (name, namespace, workflow, status, behavior, version)
EXECUTIONS = [
    ("auto-1", "default", "order-1", "running", "auto_upgrade", "deploy.v2"),
    ("auto-2", "default", "order-2", "running", "auto_upgrade", "deploy.v2"),
    ("auto-3", "default", "pay-1", "running", "auto_upgrade", None),
    ("pinned-1", "default", "order-3", "running", "pinned", "deploy.build-7"),
    ("plain-1", "default", "order-4", "running", "unversioned", None),
    ("plain-2", "default", "ship-1", "running", "unversioned", None),
    ("done-1", "default", "order-5", "completed", "auto_upgrade", "deploy.v1"),
    ("hostile-1", HOSTILE_NS, "wf ✓ 'x'/y", "running", "auto_upgrade", "deploy.v2"),
    ("hostile-2", HOSTILE_NS, "wf-2", "running", "pinned", "deploy.büild-9"),
]
UNKNOWN_RUN = run_id("never-recorded")  # a uuid History has never seen
NOT_A_UUID = "run-not-a-uuid"

# v0.1/v0.2 spool rows in delivery order: (namespace, task_queue, type, partition, version, run)
SPOOL = [
    ("default", "orders", "workflow", 0, "", "plain-1"),
    ("default", "orders", "workflow", 0, "auto", "auto-1"),  # auto; default queue has rows
    ("default", "orders", "activity", 0, "", "plain-1"),  # same family, activity type
    ("default", "orders", "workflow", 1, "", "plain-2"),  # several partitions
    ("default", "payments", "workflow", 0, "auto", "auto-3"),  # auto; default queue empty
    ("default", "orders", "workflow", 0, "deploy.build-7", "pinned-1"),  # pinned: stays
    ("default", "orders", "workflow", 0, "auto", "auto-2"),
    ("default", "orders", "workflow", 2, "", "plain-2"),
    ("default", "orders", "workflow", 0, "", "unknown"),  # run unknown to History
    ("default", "payments", "workflow", 0, "auto", "done-1"),  # completed run
    (HOSTILE_NS, HOSTILE_TQ, "workflow", 3, "", "hostile-2"),
    (HOSTILE_NS, HOSTILE_TQ, "workflow", 3, "auto", "hostile-1"),
    (HOSTILE_NS, HOSTILE_TQ, "activity", 3, "deploy.büild-9", "hostile-2"),
    ("default", "orders", "activity", 0, "auto", "not-a-uuid"),  # runId not a uuid
    ("default", "orders", "workflow", 0, "", "plain-1"),
]

USER_DATA = [
    ("default", "orders", 3, {"versioning": {"current": "deploy.v2", "ramping": None}}),
    ("default", "payments", 1, {"versioning": {"current": "deploy.v2"}}),
    (HOSTILE_NS, HOSTILE_TQ, 2, {"note": "it's 100% ünïcødé"}),
]


def _run_of(name: str) -> str:
    if name == "unknown":
        return UNKNOWN_RUN
    if name == "not-a-uuid":
        return NOT_A_UUID
    return run_id(name)


def _payload(ns: str, run: str, kind: str, event: int) -> dict[str, Any]:
    workflow = next((e[2] for e in EXECUTIONS if run_id(e[0]) == run), f"wf-{run[:8]}")
    return {
        "task": {
            "namespace": ns,
            "workflowId": workflow,
            "runId": run,
            "kind": kind,
            "scheduledEventId": event,
            "attempt": 1,
        },
        "enqueuedAt": f"2026-01-01T00:00:{event:02d}Z",
    }


def _lit(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, dict):
        value = json.dumps(value, ensure_ascii=False, sort_keys=True)
    return "'" + str(value).replace("'", "''") + "'"


def _history_sql(scheduled: list[tuple[str, int, str, bool]]) -> list[str]:
    stmts = [
        "INSERT INTO executions (run_id, namespace, workflow_id, status, versioning_behavior, "
        f"deployment_version, created_at) VALUES ({_lit(run_id(n))}, {_lit(ns)}, {_lit(wf)}, "
        f"{_lit(st)}, {_lit(b)}, {_lit(v)}, {_lit(EPOCH)});"
        for n, ns, wf, st, b, v in EXECUTIONS
    ]
    known = {run_id(e[0]) for e in EXECUTIONS}
    for run, event, kind, started in scheduled:
        if run in known:
            stmts.append(
                "INSERT INTO scheduled_tasks (run_id, scheduled_event_id, kind, started_at) "
                f"VALUES ({_lit(run)}, {event}, {_lit(kind)}, "
                f"{_lit(EPOCH) if started else 'NULL'});"
            )
    return stmts


def spool_rows() -> list[tuple[str, str, str, int, str, dict[str, Any], str]]:
    rows = []
    for i, (ns, tq, ttype, part, version, run_name) in enumerate(SPOOL, start=1):
        payload = _payload(ns, _run_of(run_name), ttype, i)
        rows.append((ns, tq, ttype, part, version, payload, f"2026-01-01 00:01:{i:02d}+00"))
    return rows


def data_v01() -> list[str]:
    rows = spool_rows()
    stmts = _history_sql(
        [
            (p["task"]["runId"], p["task"]["scheduledEventId"], t, False)
            for _, _, t, _, _, p, _ in rows
        ]
    )
    for ns, tq, ttype, part, version, payload, created in rows:
        stmts.append(
            "INSERT INTO tasks (namespace, task_queue, task_type, partition, version, data, "
            f"created_at) VALUES ({_lit(ns)}, {_lit(tq)}, {_lit(ttype)}, {part}, "
            f"{_lit(version)}, {_lit(payload)}::jsonb, {_lit(created)});"
        )
    return stmts


def data_v02() -> list[str]:
    stmts = data_v01()
    for ns, tq, ud_version, data in USER_DATA:
        stmts.append(
            "INSERT INTO task_queue_user_data (namespace, task_queue, version, data, updated_at) "
            f"VALUES ({_lit(ns)}, {_lit(tq)}, {ud_version}, {_lit(data)}::jsonb, {_lit(EPOCH)});"
        )
    return stmts


# v0.3 queues: (namespace, family, type, partition, version, range, ack, last, [(id, run)])
# fmt: off
V03_QUEUES: list[tuple[str, str, str, int, str, int, int, int, list[tuple[int, str]]]] = [
    # ack gap: 4 not handled, 5 dispatched above the gap, rows 4-6 retained; default queue
    # that also receives a relocated backlog (collision case: stale last 5 < highest row 6)
    ("default", "orders", "workflow", 0, "", 7, 3, 5,
     [(4, "plain-1"), (5, "unknown"), (6, "plain-1")]),
    ("default", "orders", "workflow", 0, "auto", 7, 2, 4, [(3, "auto-1"), (4, "auto-2")]),
    # activity queue of the same family, separate range
    ("default", "orders", "activity", 0, "", 2, 0, 2, [(1, "plain-1"), (2, "not-a-uuid")]),
    # several partitions; partition 2 is sync-matched only (ack = last = 0, no rows)
    ("default", "orders", "workflow", 1, "", 3, 10, 12, [(11, "plain-2"), (12, "plain-2")]),
    ("default", "orders", "workflow", 2, "", 4, 0, 0, []),
    # auto backlog whose default queue is empty and has no metadata row yet
    ("default", "payments", "workflow", 0, "auto", 1, 0, 2, [(1, "auto-3"), (2, "done-1")]),
    # auto backlog with a stale last_task_id (rows above it); default queue drained (last 10)
    ("default", "shipping", "workflow", 0, "auto", 2, 1, 2,
     [(2, "auto-1"), (3, "auto-2"), (5, "auto-3")]),
    ("default", "shipping", "workflow", 0, "", 5, 10, 10, []),
    # pinned queue: not relocated
    ("default", "orders", "workflow", 0, "deploy.build-7", 1, 0, 2,
     [(1, "pinned-1"), (2, "pinned-1")]),
    # an already drained legacy auto queue: only fenced
    ("default", "billing", "workflow", 0, "auto", 3, 8, 8, []),
    # sync-matched queue that delivered work without ever storing a row
    ("default", "billing", "activity", 0, "", 9, 0, 0, []),
    # hostile names, default + auto + pinned
    (HOSTILE_NS, HOSTILE_TQ, "workflow", 3, "", 1, 0, 1, [(1, "hostile-2")]),
    (HOSTILE_NS, HOSTILE_TQ, "workflow", 3, "auto", 1, 0, 2, [(1, "hostile-1"), (2, "unknown")]),
    (HOSTILE_NS, HOSTILE_TQ, "activity", 3, "deploy.büild-9", 1, 0, 1, [(1, "hostile-2")]),
    # a kept queue whose rows belong to runs with three different directives (each row must
    # get its own run's, not a neighbour's)
    ("default", "invoices", "workflow", 0, "", 2, 0, 3,
     [(1, "plain-1"), (2, "pinned-1"), (3, "auto-1")]),
    # a stale counter on a queue that receives no relocation (only the repair step fixes it)
    ("default", "refunds", "workflow", 0, "", 1, 0, 2,
     [(1, "plain-2"), (2, "plain-2"), (3, "plain-2"), (4, "plain-2")]),
    # top rows already purged: last_task_id above the highest stored id must stay (no reuse)
    ("default", "refunds", "activity", 0, "", 1, 0, 10, [(1, "plain-1"), (2, "plain-1")]),
]
# fmt: on


def data_v03() -> list[str]:
    scheduled: list[tuple[str, int, str, bool]] = []
    stmts: list[str] = []
    event = 100
    for ns, tq, ttype, part, version, rng, ack, last, rows in V03_QUEUES:
        key = legacy_queue(ns, tq, ttype, part, version)
        stmts.append(
            "INSERT INTO task_queues (physical_queue, namespace, task_queue, task_type, "
            f"partition, version, range_id, ack_level, last_task_id) VALUES ({_lit(key)}, "
            f"{_lit(ns)}, {_lit(tq)}, {_lit(ttype)}, {part}, {_lit(version)}, {rng}, {ack}, "
            f"{last});"
        )
        for task_id, run_name in rows:
            event += 1
            run = _run_of(run_name)
            scheduled.append((run, event, ttype, task_id % 2 == 1 and task_id > ack))
            stmts.append(
                "INSERT INTO tasks (physical_queue, task_id, data, created_at) VALUES "
                f"({_lit(key)}, {task_id}, {_lit(_payload(ns, run, ttype, event))}::jsonb, "
                f"'2026-01-01 00:02:00+00'::timestamptz + interval '{event} seconds');"
            )
    stmts = _history_sql(scheduled) + stmts
    for ns, tq, ud_version, data in USER_DATA:
        stmts.append(
            "INSERT INTO task_queue_user_data (namespace, task_queue, version, data, updated_at) "
            f"VALUES ({_lit(ns)}, {_lit(tq)}, {ud_version}, {_lit(data)}::jsonb, {_lit(EPOCH)});"
        )
    return stmts


FIXTURES: dict[str, dict[str, Any]] = {
    "v0.1": {
        "revision": "001",
        "data": data_v01,
        "exercises": [
            "spool rows in interleaved delivery order across queues",
            "workflow and activity queues of one family",
            "several partitions",
            "legacy auto backlog whose default queue has rows",
            "legacy auto backlog whose default queue is empty",
            "pinned queues (not relocated)",
            "runs unknown to History and a non-uuid runId",
            "a completed run",
            "hostile names (/ @ % ' spaces unicode)",
        ],
    },
    "v0.2": {
        "revision": "002",
        "data": data_v02,
        "exercises": ["everything v0.1 holds", "user data rows, hostile family names"],
    },
    "v0.3": {
        "revision": "003",
        "data": data_v03,
        "exercises": [
            "acknowledgement gaps (dispatched rows retained above a gap)",
            "sync-matched queues with ack_level = last_task_id = 0",
            "several partitions",
            "workflow and activity queue of one family",
            "auto backlog whose default queue has no metadata row",
            "auto backlog whose default queue has rows and a stale last_task_id (collision)",
            "auto backlog with a stale last_task_id and a drained default queue (last 10)",
            "an already drained legacy auto queue",
            "pinned queues (not relocated)",
            "a kept queue holding rows of runs with different directives",
            "a stale last_task_id on a queue that receives no relocation",
            "last_task_id above the highest stored id (purged rows; ids never reused)",
            "runs unknown to History and a non-uuid runId",
            "user data rows",
            "hostile names (/ @ % ' spaces unicode)",
        ],
    },
}
