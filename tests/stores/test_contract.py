"""One contract, two stores: every case runs on the memory store and on PostgreSQL."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator

import pytest

from queueguard.core.history import task_payload
from queueguard.core.keys import PhysicalQueue
from queueguard.core.store import Execution, StartOutcome, Store
from queueguard.errors import StaleRangeError, UserDataConflict
from queueguard.runtime.backlog import BacklogManager
from queueguard.stores.postgres import PostgresStore

from ..conftest import store_factory

StoreFactory = Callable[[], Store]


@pytest.fixture(params=["memory", "postgres", "pgbouncer"])
def new_store(request: pytest.FixtureRequest) -> Iterator[StoreFactory]:
    """The contract on both stores, and on PostgreSQL through a transaction pooler."""
    yield from store_factory(request, request.param)


Q = PhysicalQueue("ns", "orders", "workflow", 0)


def _run(store: Store, event: int, status: str = "running") -> dict[str, object]:
    run_id = str(uuid.uuid4())
    store.history.add_execution(Execution(run_id, "ns", f"wf-{event}", status))
    store.history.schedule_task(run_id, event, "workflow")
    return task_payload("ns", f"wf-{event}", run_id, "workflow", event)


def test_new_queue_starts_at_range_one_and_reload_increments(new_store: StoreFactory) -> None:
    store = new_store()
    assert store.load_queue(Q).range_id == 1
    assert store.load_queue(Q).range_id == 2
    assert store.queue_state(Q) is not None


def test_seed_scenario_ack_gap_then_prefix(new_store: StoreFactory) -> None:
    """Tasks 1, 2, 3: 2 dispatches first (ack stays 0), then 1 (ack 2, rows 1-2 gone)."""
    store = new_store()
    mgr = BacklogManager(store, Q, store.history)
    mgr.load()
    ids = [mgr.spool(_run(store, e)) for e in (1, 2, 3)]
    assert ids == [1, 2, 3]
    assert [t.task_id for t in mgr.read()] == [1, 2, 3]
    assert mgr.dispatch(2) is StartOutcome.STARTED
    state = store.queue_state(Q)
    assert state is not None and state.ack_level == 0
    assert store.task_ids(Q) == [1, 2, 3]
    assert mgr.progress().done_above_gap == [2]
    assert mgr.dispatch(1) is StartOutcome.STARTED
    state = store.queue_state(Q)
    assert state is not None and (state.ack_level, state.last_task_id) == (2, 3)
    assert store.task_ids(Q) == [3]


def test_replay_after_crash_is_rejected_as_already_started(new_store: StoreFactory) -> None:
    store = new_store()
    mgr = BacklogManager(store, Q, store.history)
    mgr.load()
    for e in (1, 2, 3):
        mgr.spool(_run(store, e))
    mgr.read()
    assert mgr.dispatch(2) is StartOutcome.STARTED
    # crash: process state vanishes, the next owner re-reads above the saved ack level
    other = new_store()
    successor = BacklogManager(other, Q, other.history)
    state = successor.load()
    assert state.range_id == 2 and state.ack_level == 0
    assert [t.task_id for t in successor.read()] == [1, 2, 3]
    assert successor.dispatch(2) is StartOutcome.ALREADY_STARTED
    assert successor.dispatch(1) is StartOutcome.STARTED
    assert other.task_ids(Q) == [3]


def test_unload_keeps_metadata_and_rows(new_store: StoreFactory) -> None:
    store = new_store()
    mgr = BacklogManager(store, Q, store.history)
    mgr.load()
    mgr.spool(_run(store, 1))
    mgr.unload()
    assert not mgr.loaded
    assert store.task_ids(Q) == [1]
    assert mgr.load().range_id == 2


def test_takeover_fences_old_owner_across_independent_pools(new_store: StoreFactory) -> None:
    old_store, new_owner_store = new_store(), new_store()
    old = BacklogManager(old_store, Q, old_store.history)
    old.load()
    for e in (1, 2):
        old.spool(_run(old_store, e))
    old.read()
    old.dispatch(2)  # done above a gap, not yet checkpointed
    successor = BacklogManager(new_owner_store, Q, new_owner_store.history)
    successor.load()
    before = (new_owner_store.queue_state(Q), new_owner_store.task_ids(Q))

    with pytest.raises(StaleRangeError) as append_err:
        old.spool(_run(old_store, 3))
    assert (append_err.value.held, append_err.value.current) == (1, 2)
    assert not old.loaded  # a stale owner unloads; it is never silently retried

    with pytest.raises(StaleRangeError):  # checkpoint (which deletes) is fenced as well
        old_store.checkpoint(Q, 1, 2)
    assert (new_owner_store.queue_state(Q), new_owner_store.task_ids(Q)) == before


def test_workflow_and_activity_queues_of_one_family_are_separate(new_store: StoreFactory) -> None:
    store = new_store()
    wf, act = Q, PhysicalQueue("ns", "orders", "activity", 0)
    store.load_queue(wf)
    store.load_queue(wf)
    assert store.load_queue(act).range_id == 1
    store.append(act, 1, [{"task": {}}])
    assert store.task_ids(wf) == [] and store.task_ids(act) == [1]


def test_versions_are_separate_physical_queues(new_store: StoreFactory) -> None:
    store = new_store()
    pinned = Q.with_version("deploy.build-7")
    store.load_queue(Q)
    assert store.load_queue(pinned).range_id == 1
    assert store.load_queue(Q).range_id == 2


def test_batched_append_is_consecutive(new_store: StoreFactory) -> None:
    store = new_store()
    state = store.load_queue(Q)
    assert store.append(Q, state.range_id, [{"n": i} for i in range(5)]) == [1, 2, 3, 4, 5]
    assert store.append(Q, state.range_id, [{"n": 5}]) == [6]
    assert [t.data["n"] for t in store.read(Q, 2, 2)] == [2, 3]


def test_history_outcomes(new_store: StoreFactory) -> None:
    store = new_store()
    data = _run(store, 9)
    run_id = data["task"]["runId"]  # type: ignore[index]
    assert store.history.record_task_started(run_id, 9) is StartOutcome.STARTED
    assert store.history.record_task_started(run_id, 9) is StartOutcome.ALREADY_STARTED
    assert store.history.record_task_started(run_id, 10) is StartOutcome.OBSOLETE
    assert store.history.record_task_started(str(uuid.uuid4()), 1) is StartOutcome.OBSOLETE
    assert store.history.record_task_started("not-a-uuid", 1) is StartOutcome.OBSOLETE
    store.history.set_status(run_id, "completed")
    other = _run(store, 11)
    store.history.set_status(other["task"]["runId"], "terminated")  # type: ignore[index]
    assert store.history.record_task_started(other["task"]["runId"], 11) is StartOutcome.OBSOLETE  # type: ignore[index]


def test_user_data_compare_and_swap(new_store: StoreFactory) -> None:
    store = new_store()
    assert store.get_user_data("ns", "orders").version == 0
    assert store.put_user_data("ns", "orders", 0, {"a": 1}) == 1
    with pytest.raises(UserDataConflict) as err:
        store.put_user_data("ns", "orders", 0, {"a": 2})
    assert (err.value.expected, err.value.actual) == (0, 1)
    assert store.put_user_data("ns", "orders", 1, {"a": 3}) == 2
    assert store.get_user_data("ns", "orders").data == {"a": 3}


@pytest.mark.parametrize("expected", [0, 1])
def test_concurrent_user_data_writes_have_one_winner(
    new_store: StoreFactory, expected: int
) -> None:
    setup = new_store()
    if expected == 1:
        setup.put_user_data("ns", "fam", 0, {"v": 0})
    stores = [new_store() for _ in range(4)]
    barrier = threading.Barrier(len(stores))
    results: list[object] = []

    def write(store: Store, i: int) -> None:
        barrier.wait()
        try:
            results.append(store.put_user_data("ns", "fam", expected, {"writer": i}))
        except UserDataConflict as exc:
            results.append(exc)

    threads = [threading.Thread(target=write, args=(s, i)) for i, s in enumerate(stores)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    winners = [r for r in results if isinstance(r, int)]
    assert winners == [expected + 1]
    assert sum(isinstance(r, UserDataConflict) for r in results) == len(stores) - 1


def test_checkpoint_rejects_ack_beyond_last_task_id(new_store: StoreFactory) -> None:
    store = new_store()
    state = store.load_queue(Q)
    store.append(Q, state.range_id, [{"task": {}}])
    with pytest.raises(ValueError):
        store.checkpoint(Q, state.range_id, 5)
    assert store.task_ids(Q) == [1]


def test_load_refuses_when_the_protocol_table_vanishes(head_db: str) -> None:
    """The handshake in the load transaction, not only at startup."""
    import psycopg

    from queueguard.errors import ProtocolMismatch

    store = PostgresStore(head_db, host_id="vanish")
    try:
        with psycopg.connect(head_db, autocommit=True) as admin:
            admin.execute("DROP TABLE runtime_protocol")
        with pytest.raises(ProtocolMismatch, match="queueguard status"):
            store.load_queue(Q)
        assert store.queue_state(Q) is None  # the load wrote nothing
    finally:
        store.close()


UNSTORABLE = {
    "NUL in a value": {"task": {"note": "a\x00b"}},
    "NUL in a key": {"task": {"n\x00te": 1}},
    "lone surrogate in a value": {"task": {"note": "\ud800"}},
    "lone surrogate in a key": {"\udfff": 1},
    "NaN": {"task": {"score": float("nan")}},
    "Infinity deep in a list": {"task": {"scores": [1.0, [float("inf")]]}},
}


@pytest.mark.parametrize("payload", UNSTORABLE.values(), ids=UNSTORABLE.keys())
def test_both_stores_reject_what_jsonb_cannot_hold_and_write_nothing(
    new_store: StoreFactory, payload: dict[str, object]
) -> None:
    """One rule for what a payload may hold: a payload the memory store accepted but
    PostgreSQL refused would make a snapshot unimportable (and the stores disagree)."""
    store = new_store()
    state = store.load_queue(Q)
    with pytest.raises(ValueError, match=r"cannot store|not a JSON number"):
        store.append(Q, state.range_id, [{"task": {"ok": 1}}, payload])
    assert store.task_ids(Q) == []
    after = store.queue_state(Q)
    assert after is not None and after.last_task_id == 0


def test_both_stores_accept_unusual_but_storable_payloads(new_store: StoreFactory) -> None:
    store = new_store()
    state = store.load_queue(Q)
    odd = {"task": {"emoji": "🚀", "quote": 'it\'s "x"', "big": 2**62, "neg": -0.5, "e": []}}
    store.append(Q, state.range_id, [odd])
    assert [t.data for t in store.read(Q, 0, 10)] == [odd]
