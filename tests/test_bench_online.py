"""The online-upgrade benchmark at CI scale (bench/online/benchmark.py; full-scale figures in
docs/benchmarks.md, "Online upgrade"): its semantic claims hold on every run. Timings only
with generous slack: the machine is shared."""

from __future__ import annotations

import pytest

from bench.online.benchmark import run


@pytest.mark.slow  # ≈ 30 s: two upgrades of a 5,000-row database with a fleet running
def test_the_online_upgrade_loses_nothing_and_keeps_dispatching(pg_admin_dsn: str) -> None:
    results = run(5_000, 20, admin_dsn=pg_admin_dsn, baseline_s=2.0, tail_s=2.0)

    counts = results.counts
    assert counts is not None
    assert counts.added > 0 and counts.legacy_with_history > 0
    assert counts.ok, counts  # every task added was started once; no row left behind
    assert results.phases["contract"].report["after"] == "004"

    handover = results.handover
    assert handover is not None
    assert handover.dispatched["v0.3"] > 0 and handover.dispatched["v0.4"] > 0
    assert "stale" in handover.v03_failure  # the range fence arbitrated the overlap
    assert "queue_owned_by_protocol_4" in handover.v03_reload
    assert handover.added == handover.started == handover.delivered
    assert handover.duplicates == handover.lost == handover.unexpected == 0

    online, offline = results.gaps["online"], results.gaps["offline"]
    assert online.silent == 0  # every queue dispatched through the rollout
    assert online.max_s < max(offline.max_s, 10.0), (online, offline)
