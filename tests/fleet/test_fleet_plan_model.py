"""fleet plan's pure parts: how targets run side by side (`chains`), the time a wave takes
(`makespan`), and how much a target slows beside others (`Timing.stretch`)."""

from __future__ import annotations

import pytest

from queueguard.fleet.plan import chains, makespan
from queueguard.fleet.targets import Target
from queueguard.fleet.timing import Timing


def test_the_longest_start_first_on_the_slots_a_wave_has() -> None:
    assert makespan([], 4) == 0
    assert makespan([5, 4, 3, 3, 3], 2) == 10  # LPT: 5, 3 on one slot; 4, 3, 3 on the other
    assert makespan([5, 4, 3, 3, 3], 8) == 5
    assert makespan([2, 2, 2], 1) == 6


def test_schema_targets_of_one_database_make_one_chain_only_when_they_take_turns() -> None:
    a = Target(name="db1/a", dsn="dbname=db1", schema="a")
    b = Target(name="db1/b", dsn="dbname=db1", schema="b")
    c = Target(name="db2/c", dsn="dbname=db2", schema="c")
    d = Target(name="db3", dsn="dbname=db3")
    assert [[t.name for t in ch] for ch in chains([a, b, c, d], alone=True)] == [
        ["db1/a", "db1/b"], ["db2/c"], ["db3"],
    ]  # fmt: skip
    assert len(chains([a, b, c, d], alone=False)) == 4


def test_a_target_slows_once_more_run_than_the_server_takes_at_once() -> None:
    timed = Timing(overhead_ms=30, capacity=2.0)
    assert timed.stretch(1) == 1 and timed.stretch(2) == 1
    assert timed.stretch(8) == pytest.approx(4)
