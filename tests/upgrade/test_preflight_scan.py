"""The one pass of 003_task_rows.sql over tasks: its verdicts follow the documented rules on
hostile payloads, and its plan reads tasks once and hashes (no sort of every row)."""

from __future__ import annotations

import json
from typing import Any

from queueguard.pg.connect import connection
from queueguard.queue_schema import audit
from queueguard.queue_schema.preflight import preflight

from .preflight_support import RUN_AUTO, RUN_PINNED, RUN_PLAIN, by_code, execute

QUEUE = "ns/verdicts/workflow/0"
KNOWN = {RUN_AUTO, RUN_PINNED, RUN_PLAIN}  # the runs of the v0.3 fixture
UNKNOWN = "00000000-0000-4000-8000-0000000000ff"

TASK = {"runId": RUN_PLAIN, "kind": "workflow"}
PAYLOADS: list[Any] = [
    {"task": TASK},  # clean
    {"task": {**TASK, "kind": ""}},  # an empty kind is still a string
    {"task": {**TASK, "runId": UNKNOWN}},
    {"task": {**TASK, "runId": RUN_PLAIN.upper()}},  # not the text History stores
    {"task": {**TASK, "runId": "{" + RUN_PLAIN + "}"}},
    {"task": {**TASK, "runId": "true"}},
    {"task": {**TASK, "kind": 3}},  # the run is known, the kind is not a string
    {"task": {**TASK, "kind": None}},
    {"task": {**TASK, "kind": {"name": "workflow"}}},
    {"task": {"runId": RUN_PLAIN}},
    {"task": {**TASK, "runId": 7}},
    {"task": {**TASK, "runId": True}},
    {"task": {**TASK, "runId": None}},
    {"task": {**TASK, "runId": {"id": RUN_PLAIN}}},
    {"task": {**TASK, "runId": [RUN_PLAIN]}},
    {"task": {"kind": "workflow"}},
    {"task": [TASK]},
    {"task": RUN_PLAIN},
    {"task": None},
    {"run": TASK},
    [{"task": TASK}],
    RUN_PLAIN,
    7,
    None,
    {},
]


def payload_ok(p: Any) -> bool:
    """The documented rule: an object whose task is an object with string runId and kind."""
    task = p.get("task") if isinstance(p, dict) else None
    return isinstance(task, dict) and all(isinstance(task.get(k), str) for k in ("runId", "kind"))


def run_known(p: Any) -> bool:
    """task.runId is, as text, the id of a run History has."""
    task = p.get("task") if isinstance(p, dict) else None
    run = task.get("runId") if isinstance(task, dict) else None
    return isinstance(run, str) and run in KNOWN


def test_payload_and_run_verdicts_follow_the_rules(v03_db: str) -> None:
    execute(
        v03_db,
        "INSERT INTO task_queues VALUES (%s, 'ns', 'verdicts', 'workflow', 0, '', 1, 0, %s)",
        QUEUE,
        len(PAYLOADS),
    )
    with connection(v03_db) as conn:
        for task_id, data in enumerate(PAYLOADS, start=1):
            conn.execute(
                "INSERT INTO tasks (physical_queue, task_id, data) VALUES (%s, %s, %s::jsonb)",
                (QUEUE, task_id, json.dumps(data)),
            )
        conn.commit()
    found = by_code(preflight(v03_db, samples=1000))

    def ids(code: str) -> list[int]:
        finding = found.get(code)
        assert finding is None or finding.count == len(finding.samples)
        return [s["taskId"] for s in finding.samples] if finding else []

    numbered = list(enumerate(PAYLOADS, start=1))
    assert ids("data.payload_shape") == [i for i, p in numbered if not payload_ok(p)]
    assert ids("data.unknown_run") == [i for i, p in numbered if not run_known(p)]
    queues = {s["queue"] for f in found.values() if f.code.startswith("data.") for s in f.samples}
    assert queues == {QUEUE}
    assert not {"data.task_without_queue", "data.rows_at_or_below_ack"} & set(found)


# the plan -------------------------------------------------------------------------------------
ROWS = """
INSERT INTO executions (run_id, namespace, workflow_id, status, versioning_behavior)
SELECT md5('run' || r)::uuid, 'ns', 'wf-' || r, 'running', 'unversioned'
FROM generate_series(0, 3999) AS r;
INSERT INTO task_queues (physical_queue, namespace, task_queue, task_type, partition, version,
                         range_id, ack_level, last_task_id)
SELECT 'ns/plan' || q || '/workflow/0', 'ns', 'plan' || q, 'workflow', 0, '', 1, 0, 1000
FROM generate_series(0, 19) AS q;
INSERT INTO tasks (physical_queue, task_id, data)
SELECT 'ns/plan' || (g % 20) || '/workflow/0', g / 20 + 1,
       jsonb_build_object('task', jsonb_build_object('runId', md5('run' || (g % 4000))::uuid::text,
                                                     'kind', 'workflow', 'attempt', 1))
FROM generate_series(0, 19999) AS g;
ANALYZE executions, task_queues, tasks;
"""


def test_task_rows_reads_tasks_once_and_hashes(v03_db: str) -> None:
    """One sequential scan of tasks joined by hashing: no merge join, which would sort every
    task row by runId (before this plan, about half of the audit's time)."""
    with connection(v03_db, autocommit=True) as conn:
        conn.execute(ROWS)
    (query,) = [q for q in audit.audit_queries() if q.name == "003_task_rows.sql"]
    with connection(v03_db) as conn, conn.cursor() as cur:
        cur.execute("BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        cur.execute("SET LOCAL max_parallel_workers_per_gather = 0")
        audit.set_local(cur, target="004", protocol=4)
        cur.execute("EXPLAIN (COSTS OFF) " + query.sql)
        plan = "\n".join(str(r[0]) for r in cur.fetchall())
        cur.execute("ROLLBACK")
    assert plan.count("Seq Scan on tasks") == 1, plan
    assert "Merge" not in plan and "Hash Left Join" in plan, plan
    assert "Tid Scan on tasks" in plan, plan  # rows with a finding, read again by tuple id
