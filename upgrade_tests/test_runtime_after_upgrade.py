"""The runtime on an upgraded database serves the relocated backlog in the right order."""

from __future__ import annotations

from typing import Any

from queueguard.core.keys import PhysicalQueue
from queueguard.core.store import StartOutcome
from queueguard.runtime.matching import Matching

from .conftest import rows

ORDERS = PhysicalQueue("default", "orders", "workflow", 0)


def test_default_queue_delivers_old_rows_then_relocated(
    queueguard_upgraded_db: str, queueguard_runtime: Matching
) -> None:
    stored = rows(
        queueguard_upgraded_db,
        "SELECT task_id, data FROM tasks WHERE physical_queue = 'default/orders/workflow/0'"
        " ORDER BY task_id",
    )
    assert [r[0] for r in stored] == [4, 5, 6, 7, 8]  # kept 4-6, relocated 7-8 above max(5, 6)
    mgr = queueguard_runtime.manager(ORDERS)
    assert mgr.range_id == 9  # 7, fenced to 8 by 004, loaded: 9
    read = [t.task_id for t in mgr.read()]
    assert read == [4, 5, 6, 7, 8]
    outcomes: list[Any] = [mgr.dispatch(task_id) for task_id in read]
    assert all(o is not StartOutcome.RETRYABLE for o in outcomes)
    assert rows(
        queueguard_upgraded_db,
        "SELECT count(*) FROM tasks WHERE physical_queue = 'default/orders/workflow/0'",
    ) == [(0,)]
    assert rows(
        queueguard_upgraded_db,
        "SELECT ack_level, last_task_id FROM task_queues WHERE "
        "physical_queue = 'default/orders/workflow/0'",
    ) == [(8, 8)]


def test_spooling_after_upgrade_continues_above_relocated_ids(
    queueguard_upgraded_db: str, queueguard_runtime: Matching
) -> None:
    result = queueguard_runtime.add_task(ORDERS, {"task": {"runId": "x", "kind": "workflow"}})
    assert result.task_id == 9
