"""`queueguard upgrade --online` on quiescent input: the same end state as offline 004 (beside
the documented range difference), the fresh catalog, each phase resumable, each refusal."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable

import pytest

from queueguard.engine import catalog
from queueguard.errors import (
    HostsConnected,
    MigrationRefused,
    ProtocolMismatch,
    RolloutInProgress,
    RolloutRefused,
    SchemaTooOld,
)
from queueguard.pg.connect import connection
from queueguard.pg.scratch import dbname_of
from queueguard.queue_schema import online
from queueguard.queue_schema.golden import Fixture, all_fixtures, load
from queueguard.queue_schema.legacy.workers import LegacyQueue, V03Worker
from queueguard.queue_schema.online.equivalence import quiescent_differences, task_multiset
from queueguard.queue_schema.online.probe_common import wait_gone
from queueguard.queue_schema.preflight import preflight
from queueguard.queue_schema.rehearse import of_own_set as rehearse
from queueguard.queue_schema.runner import upgrade
from queueguard.queue_schema.status import status
from queueguard.stores.postgres import PostgresStore
from tests.upgrade.online_support import export, rows, seed_hostile

KNOBS = online.Knobs(batch_size=3, max_lag_s=None, lease_s=2, wait_s=2)


@pytest.fixture(params=[f.name for f in all_fixtures()])
def fixture(request: pytest.FixtureRequest) -> Fixture:
    return next(f for f in all_fixtures() if f.name == request.param)


def _catalog(dsn: str) -> catalog.Catalog:
    with connection(dsn) as conn:
        return catalog.introspect(conn)


def _at_003(make_db: Callable[..., str], fixture: Fixture) -> str:
    db = make_db()
    load(fixture, db)
    if fixture.revision != "003":
        upgrade(db, to="003", progress=False)
    return db


@pytest.mark.slow
def test_online_equals_offline_on_every_fixture(
    make_db: Callable[..., str], fixture: Fixture, head_db: str
) -> None:
    template = _at_003(make_db, fixture)
    offline = make_db(template=dbname_of(template))
    upgrade(offline, progress=False)
    db = make_db(template=dbname_of(template))
    report = online.run(db, knobs=KNOBS)
    assert report.phases == ["expand", "migrate", "contract"] and report.phase == "done"
    assert report.after == "004" and report.batches > 3
    assert quiescent_differences(export(offline), export(db)) == []
    assert catalog.diff(_catalog(head_db), _catalog(db)) == []
    assert rows(db, "SELECT revision, sha256 FROM queueguard_migrations ORDER BY 1") == rows(
        offline, "SELECT revision, sha256 FROM queueguard_migrations ORDER BY 1"
    )
    again = online.run(db, knobs=KNOBS)  # at head: nothing to do, nothing written
    assert again.phases == [] and again.phase == "done" and export(db) == export(db)


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_online_equals_offline_on_generated_hostile_data(
    make_db: Callable[..., str], seed: int
) -> None:
    template = make_db()
    seed_hostile(template, seed)
    offline = make_db(template=dbname_of(template))
    db = make_db(template=dbname_of(template))
    try:
        upgrade(offline, progress=False)
    except MigrationRefused as refused:  # the guard is shared: online refuses alike
        with pytest.raises(MigrationRefused) as online_refused:
            online.run(db, knobs=KNOBS)
        assert [f.code for f in online_refused.value.findings] == [f.code for f in refused.findings]
        assert rows(db, "SELECT to_regclass('queueguard_rollout')") == [(None,)]
        return
    online.run(db, knobs=KNOBS)
    before, after = export(offline), export(db)
    assert quiescent_differences(before, after) == []
    assert task_multiset(before) == task_multiset(after)


def test_each_phase_alone_and_reruns_are_no_ops(
    make_db: Callable[..., str], fixture: Fixture
) -> None:
    db = _at_003(make_db, fixture)
    expanded = online.run(db, phase="expand", knobs=KNOBS)
    assert expanded.phase == "migrate" and expanded.after == "003"
    assert rows(db, "SELECT min_protocol, max_protocol FROM runtime_protocol") == [(3, 4)]
    assert online.run(db, phase="expand", knobs=KNOBS).phases == []  # already expanded
    with pytest.raises(RolloutRefused, match="contract is not due"):
        online.run(db, phase="contract", knobs=KNOBS)
    migrated = online.run(db, phase="migrate", knobs=KNOBS)
    assert migrated.phase == "contract" and migrated.after == "003"
    assert online.run(db, phase="migrate", knobs=KNOBS).phases == []
    done = online.run(db, phase="contract", knobs=KNOBS)
    assert done.phase == "done" and done.after == "004"
    assert rows(db, "SELECT min_protocol, max_protocol FROM runtime_protocol") == [(4, 4)]


def test_hosts_of_the_head_start_only_in_the_window(
    make_db: Callable[..., str], fixture: Fixture
) -> None:
    db = _at_003(make_db, fixture)
    with pytest.raises(SchemaTooOld):
        PostgresStore(db, create_schema=False)
    online.run(db, phase="expand", knobs=KNOBS)
    store = PostgresStore(db, host_id="v4", create_schema=False)
    try:
        from queueguard.core.keys import PhysicalQueue

        queue = PhysicalQueue("online", "fam", "workflow", 0)
        state = store.load_queue(queue)
        held = rows(
            db,
            "SELECT protocol4_range, range_id FROM task_queues WHERE physical_queue = %s",
            (queue.key,),
        )
        assert held == [(state.range_id, state.range_id)]
        # a v0.3 host may not take a queue a v0.4 host holds: the database refuses it
        with V03Worker(db, host_id="old") as old:
            old.start()
            with pytest.raises(Exception, match="queue_owned_by_protocol_4"):
                old.load(LegacyQueue("online", "fam"))
            old.load(LegacyQueue("online", "other"))  # a queue no v0.4 host holds: fine
    finally:
        store.close()


def test_offline_paths_refuse_while_a_rollout_is_in_progress(
    make_db: Callable[..., str], fixture: Fixture
) -> None:
    db = _at_003(make_db, fixture)
    online.run(db, phase="expand", knobs=KNOBS)
    with pytest.raises(RolloutInProgress, match="phase migrate"):
        upgrade(db, progress=False)
    with pytest.raises(RolloutInProgress, match="rehearse"):
        rehearse(db)
    found = {f.code: f for f in preflight(db).findings}
    assert found["rollout.in_progress"].samples == [{"target": "004", "phase": "migrate"}]
    doc = status(db)
    assert doc["rollout"]["phase"] == "migrate" and doc["revision"] == "003"
    assert doc["rollout"]["rowsLeft"]["directives"] > 0


def test_contract_refuses_while_v03_hosts_are_connected(
    make_db: Callable[..., str], fixture: Fixture
) -> None:
    db = _at_003(make_db, fixture)
    online.run(db, phase="expand", knobs=KNOBS)
    online.run(db, phase="migrate", knobs=KNOBS)
    with V03Worker(db, host_id="straggler") as old:
        old.start()
        with pytest.raises(HostsConnected, match="straggler"):
            online.run(db, knobs=KNOBS)
        assert rows(db, "SELECT phase FROM queueguard_rollout") == [("contract",)]
        report = online.run(db, knobs=KNOBS, force=True)
        assert report.phase == "done" and report.queues_fenced > 0
        with pytest.raises(ProtocolMismatch):  # its next load: the handshake refuses
            old.load(LegacyQueue("default", "orders"))


def test_abort_returns_to_003_and_migrated_rows_stay_valid(
    make_db: Callable[..., str], fixture: Fixture
) -> None:
    db = _at_003(make_db, fixture)
    fresh_003 = make_db()
    upgrade(fresh_003, to="003", progress=False)
    offline = make_db(template=dbname_of(db))
    online.run(db, phase="expand", knobs=KNOBS)
    online.run(db, phase="migrate", knobs=KNOBS)
    store = PostgresStore(db, host_id="v4", create_schema=False)
    try:
        with pytest.raises(HostsConnected, match="protocol-4"):
            online.run(db, phase="abort", knobs=KNOBS)
    finally:
        store.close()
        wait_gone(db, store.application_name)  # its backend leaves pg_stat_activity
    report = online.run(db, phase="abort", knobs=KNOBS)
    assert report.phase == "aborted" and report.after == "003"
    assert rows(db, "SELECT min_protocol, max_protocol FROM runtime_protocol") == [(3, 3)]
    assert catalog.diff(_catalog(fresh_003), _catalog(db)) == []  # the additive state is gone
    with V03Worker(db, host_id="back") as old:  # v0.3 serves the migrated rows
        old.start()
        for queue in (
            LegacyQueue("default", "orders"),
            LegacyQueue("default", "orders", version="auto"),  # drained by migrate
        ):
            old.load(queue)
            task_id = old.append(queue, {"task": {"runId": "x", "kind": "workflow"}})
            assert [r[0] for r in old.read(queue, task_id - 1)] == [task_id]
            if queue.version:  # (a checkpoint of the default queue would delete its rows)
                assert old.checkpoint(queue, task_id) == 1
    upgrade(db, progress=False)  # a later offline upgrade finishes the job
    upgrade(offline, progress=False)
    mine, reference = export(db), export(offline)
    for doc in (mine, reference):  # the probe tasks above are not part of the comparison
        for queue in doc["queues"]:
            queue["tasks"] = [t for t in queue["tasks"] if t["data"]["task"].get("runId") != "x"]
    assert task_multiset(mine) == task_multiset(reference)


@pytest.mark.slow
def test_cli_online_json_and_exit_codes(make_db: Callable[..., str], fixture: Fixture) -> None:
    db = _at_003(make_db, fixture)
    base = [sys.executable, "-m", "queueguard.cli", "upgrade", "--online", "--dsn", db, "--json"]
    done = subprocess.run([*base, "--batch-size", "2"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["schemaVersion"] == 1 and doc["phase"] == "done" and doc["after"] == "004"
    bad = subprocess.run([*base, "--batch-size", "0"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "--batch-size" in bad.stderr
    refused = subprocess.run(
        [*base, "--phase", "abort"], capture_output=True, text=True, timeout=60
    )
    assert refused.returncode == 1 and "no online rollout in progress" in refused.stderr
