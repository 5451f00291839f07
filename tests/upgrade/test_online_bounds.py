"""The online upgrade's bounds: lock waits end at the lock timeout in every phase (a refusal
leaves every committed batch valid and a rerun resumes), the source is fenced before its rows
move, Ctrl-C pauses after the batch in flight."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Callable

import pytest

from queueguard.errors import LockTimeout, StaleRangeError
from queueguard.pg.connect import connect
from queueguard.pg.scratch import dbname_of
from queueguard.queue_schema import online
from queueguard.queue_schema.golden import get, load
from queueguard.queue_schema.legacy.workers import LegacyQueue, V03Worker
from queueguard.queue_schema.online.equivalence import quiescent_differences
from queueguard.queue_schema.runner import upgrade
from tests.upgrade.online_support import export, rows

FAST = online.Knobs(batch_size=2, lock_timeout_ms=100, retries=2, max_lag_s=None, wait_s=2)
AUTO = LegacyQueue("default", "orders", version="auto")


def _v03(make_db: Callable[..., str]) -> str:
    db = make_db()
    load(get("v0.3"), db)
    return db


def test_expand_gives_up_at_the_lock_timeout_and_resumes(make_db: Callable[..., str]) -> None:
    db = _v03(make_db)
    blocker = connect(db)
    blocker.execute("SELECT count(*) FROM task_queues")  # ACCESS SHARE until it ends
    started = time.monotonic()
    with pytest.raises(LockTimeout, match="lock"):
        online.run(db, phase="expand", knobs=FAST)
    waited = time.monotonic() - started
    assert waited < 10, waited  # 3 attempts x 100 ms plus backoff, with generous slack
    assert rows(db, "SELECT phase FROM queueguard_rollout") == [("expand",)]
    assert rows(db, "SELECT min_protocol, max_protocol FROM runtime_protocol") == [(3, 3)]
    blocker.rollback()
    blocker.close()
    assert online.run(db, phase="expand", knobs=FAST).phase == "migrate"


def test_a_refused_batch_stops_migrate_with_committed_batches_valid(
    make_db: Callable[..., str],
) -> None:
    db = _v03(make_db)
    reference = make_db(template=dbname_of(db))
    upgrade(reference, progress=False)
    online.run(db, phase="expand", knobs=FAST)
    blocker = connect(db)
    blocker.execute("SELECT 1 FROM task_queues WHERE physical_queue = %s FOR UPDATE", (AUTO.key,))
    with pytest.raises(LockTimeout, match="relocate"):
        online.run(db, phase="migrate", knobs=FAST)
    assert rows(db, "SELECT phase FROM queueguard_rollout") == [("migrate",)]
    blocker.rollback()
    blocker.close()
    online.run(db, knobs=FAST)  # resumes: migrate, then contract
    assert quiescent_differences(export(reference), export(db)) == []


def test_the_source_is_fenced_before_its_rows_move(make_db: Callable[..., str]) -> None:
    """A v0.3 owner of an @auto queue that read rows the migrator then moved fails its next
    checkpoint with a range conflict (and unloads), not with an out-of-bounds ack level."""
    db = _v03(make_db)
    online.run(db, phase="expand", knobs=FAST)
    with V03Worker(db, host_id="auto-owner") as old:
        old.start()
        old.load(AUTO)
        read = old.read(AUTO, 0, 10)
        assert read
        online.run(db, phase="migrate", knobs=FAST)
        with pytest.raises(StaleRangeError):
            old.checkpoint(AUTO, read[-1][0])
        assert AUTO.key not in old.ranges  # unloaded: its next use reloads
        again = old.load(AUTO)  # @auto stays open to v0.3 until contract
        assert again.ack_level == again.last_task_id and old.read(AUTO, 0, 10) == []


def test_ctrl_c_pauses_after_the_batch_in_flight(make_db: Callable[..., str]) -> None:
    db = make_db()
    from bench.common.v3_database import seed_v3

    upgrade(db, to="003", progress=False)
    seed_v3(db, 4000)
    online.run(db, phase="expand", knobs=FAST)
    command = [sys.executable, "-m", "queueguard.cli", "upgrade", "--online", "--dsn", db]
    command += ["--phase", "migrate", "--batch-size", "20", "--pause", "50ms", "--json"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not rows(db, "SELECT rows_done FROM queueguard_rollout")[0][0]:
        assert time.monotonic() < deadline and process.poll() is None
        time.sleep(0.05)
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 1, err
    report = json.loads(out)
    assert report["paused"] and report["phase"] == "migrate" and "rerun" in report["next"]
    assert "Traceback" not in err and "pausing after the batch" in err
    assert rows(db, "SELECT holder FROM queueguard_rollout") == [(None,)]  # lease given back
    assert online.run(db, knobs=FAST.__class__(batch_size=500, max_lag_s=None)).phase == "done"
