"""Concurrent upgrade runners: exactly one migrates."""

from __future__ import annotations

import json
import subprocess

from .support import ALL, QUEUEGUARD, ROOT, revision, rows


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
