"""A v0.4 host that holds a default queue while `upgrade --online` relocates `@auto` rows into
it dispatches those rows: while the rollout is in progress it is not the queue's only writer."""

from __future__ import annotations

import uuid
from collections.abc import Callable

from bench.common.v3_database import seed_v3
from queueguard.core.history import task_payload
from queueguard.core.keys import PhysicalQueue
from queueguard.pg.connect import connection
from queueguard.queue_schema import online
from queueguard.queue_schema.legacy.workers import LegacyQueue, V03Worker
from queueguard.queue_schema.runner import upgrade
from queueguard.runtime.matching import Matching
from queueguard.stores.postgres import PostgresStore

QUEUE = PhysicalQueue("bulk", "f1", "workflow", 0)


def test_rows_relocated_into_a_loaded_queue_are_dispatched(make_db: Callable[..., str]) -> None:
    dsn = make_db()
    upgrade(dsn, to="003", progress=False)
    seed_v3(dsn, 400)  # 20 rows in each default queue, 20 in its @auto sibling
    online.run(dsn, phase="expand")
    store = PostgresStore(dsn, host_id="h1", create_schema=False)
    matching = Matching(store, "h1")
    try:
        before = list(iter(lambda: matching.poll(QUEUE), None))  # loads the queue, drains it
        online.run(dsn, phase="migrate")  # 20 rows relocated behind the loaded owner
        relocated = list(iter(lambda: matching.poll(QUEUE), None))
        online.run(dsn, phase="contract")
    finally:
        matching.shutdown()
        store.close()
    # 90 % of the runs are known to History (seed_v3): the others are acked as obsolete
    assert len(before) == 18 and len(relocated) == 18
    assert min(d.task_id or 0 for d in relocated) > max(d.task_id or 0 for d in before)
    with connection(dsn) as conn:
        left = conn.execute("SELECT count(*) FROM tasks WHERE physical_queue = %s", (QUEUE.key,))
        assert left.fetchone() == (0,)


def test_a_queue_loaded_while_contract_moves_leftovers_dispatches_them(
    make_db: Callable[..., str],
) -> None:
    """Contract closes the window to [4, 4] first, then moves what v0.3 hosts wrote since
    migrate into the default queues. A v0.4 host that loads a queue in between is still not
    its only writer: it must read the moved rows (the fleet test once stranded 12 of them)."""
    dsn = make_db()
    upgrade(dsn, to="003", progress=False)
    seed_v3(dsn, 400)
    online.run(dsn, phase="expand")
    online.run(dsn, phase="migrate")
    runs = [str(uuid.uuid4()) for _ in range(3)]
    # History knows them: they are dispatched, not dropped as obsolete
    with connection(dsn, autocommit=True) as conn:
        for run in runs:
            conn.execute(
                "INSERT INTO executions (run_id, namespace, workflow_id, status, "
                "versioning_behavior) VALUES (%s, 'bulk', %s, 'running', 'auto_upgrade')",
                (run, f"wf-{run}"),
            )
            conn.execute(
                "INSERT INTO scheduled_tasks (run_id, scheduled_event_id, kind) "
                "VALUES (%s, 1, 'workflow')",
                (run,),
            )
    with V03Worker(dsn, host_id="old") as worker:  # a v0.3 host writes @auto after migrate
        worker.start()
        auto = LegacyQueue("bulk", "f1", version="auto")
        worker.load(auto)
        for run in runs:
            worker.append(auto, task_payload("bulk", f"wf-{run}", run, "workflow", 1))
    store = PostgresStore(dsn, host_id="h1", create_schema=False)
    matching = Matching(store, "h1")
    seen: list[str] = []

    def tell(message: object) -> None:  # right after the window closed, before the leftovers
        if str(message).startswith("contract: window closed"):
            seen.append(message)
            assert matching.poll(QUEUE) is not None  # loads the queue (seeded rows wait)

    try:
        report = online.run(dsn, phase="contract", tell=tell)
        delivered = list(iter(lambda: matching.poll(QUEUE), None))
    finally:
        matching.shutdown()
        store.close()
    assert seen and report.phase == "done" and report.rows_relocated == len(runs)
    assert {d.data["task"]["runId"] for d in delivered} >= set(runs)
    with connection(dsn) as conn:
        left = conn.execute("SELECT count(*) FROM tasks WHERE physical_queue = %s", (QUEUE.key,))
        assert left.fetchone() == (0,)
