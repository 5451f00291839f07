"""Per-queue dispatch gaps: how long each queue went without a dispatch across a window."""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any


def longest_gap(times: Sequence[float], start: float, end: float, observed_until: float) -> float:
    """The longest interval between two consecutive dispatches of one queue that overlaps
    [start, end] (`times` ascending). With no dispatch before `start`, `start` itself counts
    as one (the offline side: dispatch stops when the upgrade starts); with none after `end`,
    the gap runs to `observed_until` (the queue never came back while we watched)."""
    first_after = bisect.bisect_right(times, start)
    points = [times[first_after - 1] if first_after else start]
    later = first_after
    while later < len(times) and times[later] <= end:
        points.append(times[later])
        later += 1
    points.append(times[later] if later < len(times) else observed_until)
    return max(b - a for a, b in pairwise(points))


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest rank (with 100 queues, p99 is the second longest)."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


@dataclass(frozen=True)
class Gaps:
    """Each queue's longest gap over one window, summarised across queues."""

    window_s: float
    queues: int
    p50_s: float
    p99_s: float
    max_s: float
    silent: int  # queues with no dispatch from the window's start until observation ended

    def as_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


def summarize(
    times: Sequence[Sequence[float]], start: float, end: float, observed_until: float
) -> Gaps:
    gaps = [longest_gap(t, start, end, observed_until) for t in times]
    silent = sum(1 for t in times if bisect.bisect_right(t, start) == len(t))
    return Gaps(
        window_s=end - start,
        queues=len(gaps),
        p50_s=percentile(gaps, 0.5),
        p99_s=percentile(gaps, 0.99),
        max_s=max(gaps),
        silent=silent,
    )
