"""An upgrade that fails or is killed mid-revision: 003 or 004 wholly, and a rerun completes."""

from __future__ import annotations

import random
import signal
import subprocess
import threading
import time

import pytest

from .support import (
    QUEUEGUARD,
    ROOT,
    MakeDb,
    digest,
    execute,
    protocol,
    revision,
    rows,
    run_cli,
    up,
)

BULK_FAMILIES = 10


def seed_bulk_v3(dsn: str, rows_total: int) -> None:
    """`rows_total` rows in the v0.3 shape, half in legacy auto queues (set-based SQL)."""
    per_queue = rows_total // (2 * BULK_FAMILIES)
    queue = "'bulk/f' || f || '/workflow/0' || CASE WHEN v = 'auto' THEN '@auto' ELSE '' END"
    run = "md5(f || v || i)::uuid"
    execute(
        dsn,
        f"""
        INSERT INTO task_queues (physical_queue, namespace, task_queue, task_type, partition,
                                 version, range_id, ack_level, last_task_id)
        SELECT {queue}, 'bulk', 'f' || f, 'workflow', 0, v, 2, 0, {per_queue}
        FROM generate_series(1, {BULK_FAMILIES}) f, unnest(ARRAY['', 'auto']) v;
        INSERT INTO tasks (physical_queue, task_id, data)
        SELECT {queue}, i, jsonb_build_object('task', jsonb_build_object(
                   'namespace', 'bulk', 'workflowId', 'wf-' || f || v || i,
                   'runId', {run}::text, 'kind', 'workflow', 'scheduledEventId', 1,
                   'attempt', 1), 'enqueuedAt', '2024-05-01T12:00:00Z')
        FROM generate_series(1, {BULK_FAMILIES}) f, unnest(ARRAY['', 'auto']) v,
             generate_series(1, {per_queue}) i;
        INSERT INTO executions (run_id, namespace, workflow_id, status, versioning_behavior)
        SELECT {run}, 'bulk', 'wf-' || f || v || i, 'running',
               CASE WHEN v = 'auto' THEN 'auto_upgrade' ELSE 'unversioned' END
        FROM generate_series(1, {BULK_FAMILIES}) f, unnest(ARRAY['', 'auto']) v,
             generate_series(1, {per_queue}) i
        WHERE i % 10 <> 0;
        ANALYZE;
        """,
    )


def test_statement_timeout_fails_cleanly_and_changes_nothing(make_db: MakeDb) -> None:
    dsn = make_db()
    up(dsn, to="003")
    seed_bulk_v3(dsn, 20_000)
    before = {t: digest(dsn, t) for t in ("tasks", "task_queues", "runtime_protocol")}
    result = run_cli("upgrade", "--dsn", dsn, "--statement-timeout", "5ms")
    assert result.returncode == 1, result.stderr
    assert "revision 004 failed" in result.stderr and "statement timeout" in result.stderr
    assert "Traceback" not in result.stderr
    assert revision(dsn) == "003" and protocol(dsn) == [(3, 3)]
    assert {t: digest(dsn, t) for t in before} == before


def _wait_for_backends_to_go(dsn: str, application_name: str, timeout: float) -> float:
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        left = rows(
            dsn,
            "SELECT count(*) FROM pg_stat_activity "
            "WHERE datname = current_database() AND application_name = %s",
            (application_name,),
        )
        if left == [(0,)]:
            return time.monotonic() - started
        time.sleep(0.05)
    raise AssertionError(f"{application_name} backends still there after {timeout}s")


@pytest.mark.slow
def test_sigkill_mid_004_leaves_003_or_004_wholly_and_a_rerun_completes(make_db: MakeDb) -> None:
    dsn = make_db()
    up(dsn, to="003")
    seed_bulk_v3(dsn, 200_000)
    before = {t: digest(dsn, t) for t in ("tasks", "task_queues", "runtime_protocol")}
    total = rows(dsn, "SELECT count(*) FROM tasks")[0][0]

    proc = subprocess.Popen(
        [QUEUEGUARD, "upgrade", "--dsn", dsn],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    in_004 = threading.Event()
    progress: list[str] = []

    def follow() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            progress.append(line)
            if line.strip().startswith("004 "):
                in_004.set()

    threading.Thread(target=follow, daemon=True).start()
    assert in_004.wait(60), "".join(progress)
    delay = random.uniform(0.0, 6.0)  # 004 takes ~5 s here: mostly mid-transaction
    time.sleep(delay)
    proc.send_signal(signal.SIGKILL)
    proc.wait(30)
    # The server notices the dead client (client_connection_check_interval) and rolls back.
    gone_after = _wait_for_backends_to_go(dsn, "queueguard-upgrade", 60)

    state = revision(dsn)
    context = f"killed {delay:.2f}s into 004 (rc {proc.returncode}), {''.join(progress)}"
    print(f"SIGKILL {delay:.2f}s into 004: database at {state}; backend gone in {gone_after:.2f}s")
    if state == "003":
        assert protocol(dsn) == [(3, 3)], context
        assert {t: digest(dsn, t) for t in before} == before, context
        assert rows(dsn, "SELECT to_regclass('queueguard_migrations')") == [(None,)]
    else:
        assert state == "004", context
        assert protocol(dsn) == [(4, 4)], context
    assert gone_after < 10, f"the killed upgrade's backend lingered {gone_after:.1f}s"

    rerun = run_cli("upgrade", "--dsn", dsn)
    assert rerun.returncode == 0, rerun.stderr
    assert revision(dsn) == "004" and protocol(dsn) == [(4, 4)]
    assert rows(dsn, "SELECT count(*) FROM tasks") == [(total,)]
    assert rows(
        dsn,
        "SELECT count(*) FILTER (WHERE data -> 'task' ? 'versionDirective'), "
        "count(*) FILTER (WHERE physical_queue LIKE '%@auto') FROM tasks",
    ) == [(total, 0)]
