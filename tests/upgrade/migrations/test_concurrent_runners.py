"""Concurrent upgrade runners: exactly one migrates."""

from __future__ import annotations

import json
import subprocess
import time

import psycopg
import pytest

from .support import ALL, QUEUEGUARD, ROOT, revision, rows


@pytest.mark.slow
def test_two_runners_at_once_exactly_one_migrates(empty_db: str) -> None:
    procs = [
        subprocess.Popen(
            [QUEUEGUARD, "upgrade", "--dsn", empty_db, "--json"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
        )
        for _ in range(2)
    ]
    results = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], results
    reports = [json.loads(out) for out, _ in results]
    # The runner lock is taken per revision: runners may take turns, but each revision is
    # applied by exactly one of them, in order, and the other says it was skipped.
    applied = [revision for r in reports for revision in r["applied"]]
    assert sorted(applied) == ALL
    for mine, other in (reports, reports[::-1]):
        # everything after what it found was either applied by it or by the other runner
        after_before = ALL[ALL.index(mine["before"]) + 1 :] if mine["before"] else ALL
        assert sorted(mine["applied"] + mine["skipped"]) == after_before
        assert set(mine["skipped"]) <= set(other["applied"])
    assert [r["after"] for r in reports] == ["004", "004"]
    assert revision(empty_db) == "004"
    assert rows(empty_db, "SELECT count(*) FROM queueguard_migrations") == [(4,)]


@pytest.mark.slow
def test_a_starting_runner_cannot_deadlock_with_a_revision_taking_its_locks(v03_db: str) -> None:
    """Another runner is inside 004, between `LOCK TABLE task_queues` and `LOCK TABLE tasks`
    (00_locks.sql). A runner starting now must hold no lock on `tasks` while it waits. It used
    to read 004's relocation backlog before the revision (tasks, then task_queues: the reverse
    of the documented order), and the two deadlocked: the migrating runner's `LOCK TABLE
    tasks` failed with "deadlock detected" (exit 1, "revision 004 failed: …"), the rare CI
    failure of the test above. Stress: `python -m bench.chaos.runner_start`."""
    with psycopg.connect(v03_db) as holder:
        holder.execute("LOCK TABLE task_queues IN ACCESS EXCLUSIVE MODE")
        proc = subprocess.Popen(
            [QUEUEGUARD, "upgrade", "--dsn", v03_db, "--json", "--lock-timeout", "20s"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
        )
        deadline = time.monotonic() + 30
        while not rows(v03_db, WAITING_RUNNER):  # the runner waits for task_queues
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.05)
        holder.execute("SET lock_timeout = '10s'")
        holder.execute("LOCK TABLE tasks IN ACCESS EXCLUSIVE MODE")  # was: deadlock detected
        holder.rollback()
        out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    report = json.loads(out)
    assert report["applied"] == ["004"] and report["relocated"], report


WAITING_RUNNER = """
SELECT 1 FROM pg_locks l JOIN pg_stat_activity a USING (pid)
WHERE a.application_name = 'queueguard-upgrade' AND a.datname = current_database()
  AND NOT l.granted AND l.relation = 'task_queues'::regclass
"""
