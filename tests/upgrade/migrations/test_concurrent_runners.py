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
    reports = sorted((json.loads(out) for out, _ in results), key=lambda r: len(r["applied"]))
    assert [r["applied"] for r in reports] == [[], ALL]
    assert [r["after"] for r in reports] == ["004", "004"]
    assert revision(empty_db) == "004"
    assert rows(empty_db, "SELECT count(*) FROM queueguard_migrations") == [(4,)]
