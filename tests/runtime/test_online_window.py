"""A v0.4 host that holds a default queue while `upgrade --online` relocates `@auto` rows into
it dispatches those rows: during the window it is not the queue's only writer."""

from __future__ import annotations

from collections.abc import Callable

from bench.chaos.v3_database import seed_v3
from queueguard.core.keys import PhysicalQueue
from queueguard.pg.connect import connection
from queueguard.runtime.matching import Matching
from queueguard.stores.postgres import PostgresStore
from queueguard.upgrade import online
from queueguard.upgrade.runner import upgrade

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
