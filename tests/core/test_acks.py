"""Ack-level arithmetic: the ack level is the longest fully handled prefix of read tasks."""

from __future__ import annotations

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from queueguard.core.acks import AckTracker


@st.composite
def reads_and_dispatch_order(draw: st.DrawFn) -> tuple[int, int, list[int]]:
    """(saved ack level, tasks read above it, completion order: a possibly partial shuffle)."""
    start = draw(st.integers(min_value=0, max_value=1000))
    n = draw(st.integers(min_value=0, max_value=40))
    ids = list(range(start + 1, start + n + 1))
    order = draw(st.permutations(ids))
    done = draw(st.integers(min_value=0, max_value=n))
    return start, n, order[:done]


@given(reads_and_dispatch_order())
@example((0, 3, [2, 1, 3]))  # `queueguard demo`'s walkthrough: 2 first, then 1
@example((0, 3, [3, 2]))
@example((5, 4, [9, 8, 7, 6]))
def test_ack_level_is_the_longest_completed_prefix(case: tuple[int, int, list[int]]) -> None:
    start, n, order = case
    tracker = AckTracker(ack_level=start)
    read = list(range(start + 1, start + n + 1))
    for task_id in read:
        tracker.read(task_id)
    assert tracker.read_level == start + n
    assert tracker.pending() == read

    completed: set[int] = set()
    previous = start
    for task_id in order:
        completed.add(task_id)
        level = tracker.complete(task_id)

        expected = start
        while expected + 1 in completed:
            expected += 1
        assert level == tracker.ack_level == expected
        assert level >= previous  # never backwards
        previous = level

        assert tracker.pending() == [t for t in read if t not in completed]
        assert tracker.done_above_gap() == sorted(t for t in completed if t > level)
        assert tracker.outstanding == len(tracker.pending())
        # every read task above the ack level is exactly one of pending / handled above a gap
        above = sorted(tracker.pending() + tracker.done_above_gap())
        assert above == [t for t in read if t > level]
    assert tracker.read_level == start + n  # completions never move the read level


@given(st.integers(min_value=0, max_value=100), st.integers(min_value=1, max_value=20))
def test_reads_must_be_increasing(start: int, n: int) -> None:
    tracker = AckTracker(ack_level=start)
    assert tracker.read_level == start
    for task_id in range(start + 1, start + n + 1):
        tracker.read(task_id)
    with pytest.raises(ValueError):
        tracker.read(start + n)  # re-read
    with pytest.raises(ValueError):
        tracker.read(start)  # at or below the saved ack level


def test_completing_an_unread_or_acked_task_is_an_error() -> None:
    tracker = AckTracker()
    tracker.read(1)
    tracker.read(2)
    with pytest.raises(KeyError):
        tracker.complete(3)  # never read
    assert tracker.complete(1) == 1
    with pytest.raises(KeyError):
        tracker.complete(1)  # already below the ack level
    assert tracker.pending() == [2]


def test_reads_may_skip_ids() -> None:
    """Ids read from storage need not be consecutive; the prefix is over read ids."""
    tracker = AckTracker(ack_level=3)
    for task_id in (5, 9, 10):
        tracker.read(task_id)
    assert tracker.complete(9) == 3
    assert tracker.done_above_gap() == [9]
    assert tracker.complete(5) == 9
    assert tracker.pending() == [10]
