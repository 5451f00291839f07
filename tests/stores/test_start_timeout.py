"""History's start timeout and completions: one contract, both stores (docs/data-model.md,
"History"). Time is an injected clock: no test sleeps."""

from __future__ import annotations

import math
import threading
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta

import pytest

from queueguard.core.history import redispatch_payload, task_payload
from queueguard.core.keys import PhysicalQueue
from queueguard.core.store import (
    CompletionOutcome,
    Execution,
    ExpiredStart,
    StartOutcome,
    Store,
)
from queueguard.runtime.matching import Delivery, Matching
from queueguard.runtime.timer import StartTimer
from queueguard.stores.memory import MemoryStore
from queueguard.stores.postgres import PostgresStore

from ..conftest import store_factory

TIMEOUT = 30.0
Q = PhysicalQueue("ns", "timeouts", "workflow", 0)


class Clock:
    """History's clock, moved by the test (a wall clock far from any zero)."""

    def __init__(self) -> None:
        self.now = datetime(2026, 3, 1, 12, 0, 0, 123456, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture(params=["memory", "postgres"])
def new_store(request: pytest.FixtureRequest, clock: Clock) -> Iterator[Callable[[], Store]]:
    yield from store_factory(request, request.param, start_timeout=TIMEOUT, history_clock=clock)


def _task(store: Store, event: int = 1, status: str = "running") -> tuple[str, int]:
    run_id = str(uuid.uuid4())
    store.history.add_execution(Execution(run_id, "ns", f"wf-{run_id[:8]}", status))
    store.history.schedule_task(run_id, event, "workflow")
    return run_id, event


def test_a_start_expires_after_the_timeout_and_starts_again(
    new_store: Callable[[], Store], clock: Clock
) -> None:
    history = new_store().history
    assert history.start_timeout == TIMEOUT
    task = _task(new_store())
    (first,) = history.start_tasks([task])
    assert first.outcome is StartOutcome.STARTED and first.started_at == clock.now
    clock.advance(TIMEOUT - 0.001)
    assert history.record_task_started(*task) is StartOutcome.ALREADY_STARTED
    assert history.expired_starts(10) == []
    clock.advance(0.001)
    (expired,) = history.expired_starts(10)
    assert (expired.run_id, expired.scheduled_event_id) == task
    assert (expired.kind, expired.namespace, expired.started_at) == (
        "workflow",
        "ns",
        first.started_at,
    )
    assert expired.directive == {"behavior": "unversioned", "deploymentVersion": None}
    # a re-offered copy of the task (a replay, or the timer's) is a new start
    second, repeat = history.start_tasks([task, task])
    assert second.outcome is StartOutcome.STARTED and second.started_at == clock.now
    assert repeat.outcome is StartOutcome.ALREADY_STARTED and repeat.started_at is None
    assert history.expired_starts(10) == []


def test_a_completion_names_its_start_and_history_then_forgets_the_task(
    new_store: Callable[[], Store], clock: Clock
) -> None:
    history = new_store().history
    task = _task(new_store())
    complete = history.record_task_completed
    assert complete(*task, clock.now) is CompletionOutcome.OBSOLETE  # not started
    (start,) = history.start_tasks([task])
    assert complete(*task, None) is CompletionOutcome.OBSOLETE
    assert complete(*task, clock.now + timedelta(microseconds=1)) is CompletionOutcome.OBSOLETE
    assert complete(*task, start.started_at) is CompletionOutcome.COMPLETED
    assert complete(*task, start.started_at) is CompletionOutcome.OBSOLETE  # once
    assert history.record_task_started(*task) is StartOutcome.OBSOLETE  # forgotten
    clock.advance(TIMEOUT * 2)
    assert history.expired_starts(10) == []
    assert complete("not-a-uuid", 1, start.started_at) is CompletionOutcome.OBSOLETE


def test_completions_and_expiry_only_for_running_runs(
    new_store: Callable[[], Store], clock: Clock
) -> None:
    history = new_store().history
    task = _task(new_store())
    (start,) = history.start_tasks([task])
    history.set_status(task[0], "terminated")
    assert history.record_task_completed(*task, start.started_at) is CompletionOutcome.OBSOLETE
    clock.advance(TIMEOUT)
    assert history.expired_starts(10) == []


def test_a_late_completion_of_the_first_attempt_is_obsolete(
    new_store: Callable[[], Store], clock: Clock
) -> None:
    """The timer's sequence: read the expired start, dispatch it again, end it; the copy
    starts a second attempt, whose completion counts and the first's does not."""
    history = new_store().history
    task = _task(new_store())
    (first,) = history.start_tasks([task])
    clock.advance(TIMEOUT + 1)
    (expired,) = history.expired_starts(10)
    assert history.reschedule_expired(expired)  # scheduled again, not started
    assert not history.reschedule_expired(expired)  # once
    assert history.record_task_completed(*task, first.started_at) is CompletionOutcome.OBSOLETE
    clock.advance(1)
    (second,) = history.start_tasks([task])
    assert second.outcome is StartOutcome.STARTED and second.started_at != first.started_at
    assert history.record_task_completed(*task, first.started_at) is CompletionOutcome.OBSOLETE
    assert history.record_task_completed(*task, second.started_at) is CompletionOutcome.COMPLETED


def test_reschedule_leaves_a_task_started_again_or_completed_meanwhile(
    new_store: Callable[[], Store], clock: Clock
) -> None:
    history = new_store().history
    again, done = _task(new_store()), _task(new_store())
    starts = {task: history.start_tasks([task])[0] for task in (again, done)}
    clock.advance(TIMEOUT)
    expired = {(s.run_id, s.scheduled_event_id): s for s in history.expired_starts(10)}
    assert set(expired) == {again, done}
    # the re-added copy was sync-matched before the timer ended the start
    assert history.record_task_started(*again) is StartOutcome.STARTED
    assert not history.reschedule_expired(expired[again])
    assert history.record_task_started(*again) is StartOutcome.ALREADY_STARTED
    # the first attempt completed after the timer read it
    started_at = starts[done].started_at
    assert history.record_task_completed(*done, started_at) is CompletionOutcome.COMPLETED
    assert not history.reschedule_expired(expired[done])
    forged = ExpiredStart(*again, "workflow", "ns", "wf", clock.now, {})
    assert not history.reschedule_expired(forged)  # not the task's start


def test_expired_starts_oldest_first_up_to_the_limit(
    new_store: Callable[[], Store], clock: Clock
) -> None:
    history = new_store().history
    tasks = [_task(new_store(), event) for event in (3, 1, 2)]
    for task in tasks:
        history.start_tasks([task])
        clock.advance(1)
    clock.advance(TIMEOUT)
    found = history.expired_starts(2)
    assert [(s.run_id, s.scheduled_event_id) for s in found] == tasks[:2]
    assert history.expired_starts(0) == []


@pytest.mark.parametrize("kind", ["memory", "postgres"])
def test_without_a_start_timeout_a_start_is_final(
    request: pytest.FixtureRequest, clock: Clock, kind: str
) -> None:
    factory = store_factory(request, kind, start_timeout=None, history_clock=clock)
    make = next(factory)
    history = make().history
    assert history.start_timeout is None
    task = _task(make())
    history.start_tasks([task])
    clock.advance(10 * 365 * 86400)
    assert history.record_task_started(*task) is StartOutcome.ALREADY_STARTED
    assert history.expired_starts(10) == []
    next(factory, None)


@pytest.mark.parametrize("timeout", [0.0, -1.0, math.nan])
def test_the_start_timeout_is_positive(head_db: str, timeout: float) -> None:
    with pytest.raises(ValueError, match="start_timeout"):
        MemoryStore(start_timeout=timeout)
    with pytest.raises(ValueError, match="start_timeout"):
        PostgresStore(head_db, start_timeout=timeout)


def test_the_default_start_timeout_is_ten_seconds(head_db: str) -> None:
    assert MemoryStore().history.start_timeout == 10.0
    store = PostgresStore(head_db, pool_size=1)
    try:
        assert store.history.start_timeout == 10.0
    finally:
        store.close()


# The runtime: Matching's deliveries carry their start, the timer re-dispatches -------------


def _route(start: ExpiredStart) -> PhysicalQueue:
    return Q


def test_a_stranded_start_is_dispatched_again_and_the_first_completion_is_obsolete(
    new_store: Callable[[], Store], clock: Clock
) -> None:
    """A host that died between History's start and the hand-over (the delivery never
    reached a worker) strands the task; after the timeout the timer adds it again, a worker
    gets the second attempt, and the first attempt's completion (had it run) is obsolete."""
    store = new_store()
    matching = Matching(store, "h1")
    run_id, event = _task(store)
    payload = task_payload("ns", "wf", run_id, "workflow", event)
    matching.add_task(Q, payload)
    first = matching.poll(Q)  # started; imagine the host dies before the worker gets it
    assert first is not None and first.started_at == clock.now
    assert matching.poll(Q) is None  # acked: the row is gone, nothing replays it
    timer = StartTimer(matching, _route)
    clock.advance(TIMEOUT - 1)
    assert timer.tick() == []
    clock.advance(1)
    (redispatch,) = timer.tick()
    assert redispatch.rescheduled and not redispatch.added.sync_matched
    assert redispatch.added.task_id == 2
    assert timer.tick() == []  # ended: not dispatched twice
    clock.advance(5)
    second = matching.poll(Q)
    assert second is not None and second.started_at == clock.now
    assert second.data["task"]["runId"] == run_id and second.data["task"]["attempt"] == 2
    assert second.data["task"]["versionDirective"]["behavior"] == "unversioned"
    assert matching.complete(first) is CompletionOutcome.OBSOLETE
    assert matching.complete(second) is CompletionOutcome.COMPLETED
    assert matching.complete(second) is CompletionOutcome.OBSOLETE
    state = store.queue_state(Q)
    assert state is not None and (state.ack_level, state.last_task_id) == (2, 2)
    clock.advance(TIMEOUT * 3)
    assert timer.tick() == []


def test_a_timer_that_dies_before_rescheduling_adds_the_task_again_once_started(
    new_store: Callable[[], Store], clock: Clock
) -> None:
    """Crash between the re-add and the reschedule: the next tick adds a duplicate; History
    starts one copy and answers the other already-started."""
    store = new_store()
    matching = Matching(store, "h1")
    task = _task(store)
    store.history.start_tasks([task])  # a sync match whose poller died
    clock.advance(TIMEOUT)
    (expired,) = store.history.expired_starts(10)
    matching.add_task(Q, redispatch_payload(expired))  # ... and the timer dies here
    timer = StartTimer(matching, _route)
    (again,) = timer.tick()
    assert again.rescheduled and again.added.task_id == 2
    delivery = matching.poll(Q)
    assert delivery is not None and delivery.task_id == 1
    assert matching.poll(Q) is None  # task 2: already started, acked
    assert matching.complete(delivery) is CompletionOutcome.COMPLETED


def test_a_sync_matched_delivery_carries_its_start(
    new_store: Callable[[], Store], clock: Clock
) -> None:
    store = new_store()
    matching = Matching(store, "h1")
    run_id, event = _task(store)
    got: list[Delivery | None] = []
    poller = threading.Thread(target=lambda: got.append(matching.poll(Q, timeout=10)))
    poller.start()
    while not matching._waiters.get(Q):
        threading.Event().wait(0.005)
    result = matching.add_task(Q, task_payload("ns", "wf", run_id, "workflow", event))
    poller.join()
    assert result.sync_matched
    (delivery,) = got
    assert delivery is not None and delivery.started_at == clock.now
    assert matching.complete(delivery) is CompletionOutcome.COMPLETED
