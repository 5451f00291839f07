"""The lifecycle walkthrough: why a dispatched task can remain in `tasks`.

Spool three tasks, dispatch 2 before 1, and show `persistedQueue` (durable) beside
`loadedQueueProgress` (process-local) before and after unload/reload.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from queueguard.core.history import task_payload
from queueguard.core.keys import PhysicalQueue
from queueguard.core.store import Execution, Store
from queueguard.runtime.backlog import BacklogManager

Step = dict[str, Any]


def _persisted(store: Store, queue: PhysicalQueue) -> dict[str, Any]:
    state = store.queue_state(queue)
    assert state is not None
    return {
        "range_id": state.range_id,
        "ack_level": state.ack_level,
        "last_task_id": state.last_task_id,
        "stored_task_rows": store.task_ids(queue),
    }


def _loaded(mgr: BacklogManager) -> dict[str, Any] | None:
    if not mgr.loaded:
        return None
    p = mgr.progress()
    return {
        "readLevel": p.read_level,
        "ackLevel": p.ack_level,
        "outstanding": p.outstanding,
        "handledAboveGap": p.done_above_gap,
    }


def walkthrough(store: Store, namespace: str = "demo") -> list[Step]:
    """Run the story on `store`; returns the steps (the CLI renders them)."""
    queue = PhysicalQueue(namespace, "orders", "workflow", 0)
    steps: list[Step] = []
    mgr = BacklogManager(store, queue, store.history)

    def show(title: str, action: Callable[[], Any] | None = None) -> None:
        result = action() if action else None
        steps.append(
            {
                "step": title,
                "result": result,
                "persistedQueue": _persisted(store, queue),
                "loadedQueueProgress": _loaded(mgr),
            }
        )

    payloads = []
    for event in (1, 2, 3):
        run_id = str(uuid.uuid4())
        store.history.add_execution(Execution(run_id, namespace, f"order-{event}"))
        store.history.schedule_task(run_id, event, "workflow")
        payloads.append(task_payload(namespace, f"order-{event}", run_id, "workflow", event))

    show("load (a new queue starts at range 1)", lambda: mgr.load().range_id)
    show("spool tasks 1, 2, 3", lambda: [mgr.spool(p) for p in payloads])
    show("read", lambda: [t.task_id for t in mgr.read()])
    show("dispatch 2 first: ack level stays 0, row 2 stays stored", lambda: mgr.dispatch(2).value)
    show(
        "dispatch 1: prefix 1-2 handled, ack level 2, rows 1-2 deleted",
        lambda: mgr.dispatch(1).value,
    )
    show("unload: process state vanishes, metadata and rows remain", mgr.unload)
    show(
        "reload: range increments, reading resumes above the saved ack level",
        lambda: mgr.load().range_id,
    )
    show("read", lambda: [t.task_id for t in mgr.read()])
    show("dispatch 3", lambda: mgr.dispatch(3).value)
    return steps


def _ids(ids: list[int]) -> str:
    return ", ".join(map(str, ids)) if ids else "none"


def _result(value: Any) -> str:
    return _ids(value) if isinstance(value, list) else str(value)


def _persisted_text(p: dict[str, Any]) -> str:
    return (
        f"range {p['range_id']}, ack level {p['ack_level']}, last task id {p['last_task_id']}, "
        f"stored rows {_ids(p['stored_task_rows'])}"
    )


def _progress(p: dict[str, Any] | None) -> str:
    if p is None:
        return "not loaded"
    return (
        f"read level {p['readLevel']}, ack level {p['ackLevel']}, {p['outstanding']} "
        f"outstanding, handled above a gap {_ids(p['handledAboveGap'])}"
    )


def render(title: str, steps: list[Step]) -> str:
    """The walkthrough for a terminal: each step, what is durable (`persistedQueue` in
    `--json`) and what the loaded manager knows (`loadedQueueProgress`)."""
    lines = [f"== {title} =="]
    for s in steps:
        result = f" -> {_result(s['result'])}" if s["result"] is not None else ""
        lines.append(f"- {s['step']}{result}")
        lines.append(f"    persisted: {_persisted_text(s['persistedQueue'])}")
        lines.append(f"    loaded:    {_progress(s['loadedQueueProgress'])}")
    return "\n".join(lines)
