"""Running one target outside pytest: so many examples, outcomes counted, failure kept."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from hypothesis import HealthCheck, Phase, given, settings


@dataclass
class TargetResult:
    name: str
    examples: int
    outcomes: Counter[str]
    seconds: float
    failure: str | None = None


@dataclass
class Result:
    targets: list[TargetResult] = field(default_factory=list)

    @property
    def failures(self) -> list[str]:
        return [f"{t.name}: {t.failure}" for t in self.targets if t.failure]


def explore(
    name: str,
    strategy: Any,
    check: Callable[..., str],
    examples: int,
    *,
    star: bool = False,
    shrink: bool = True,
) -> TargetResult:
    """Run one target for `examples` examples; `star`: the strategy draws argument tuples;
    `shrink=False` for slow targets (a failure is reported as first found)."""
    outcomes: Counter[str] = Counter()
    phases = [Phase.explicit, Phase.generate] + ([Phase.shrink] if shrink else [])

    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
        phases=phases,
    )
    @given(strategy)
    def prop(value: Any) -> None:
        outcomes[check(*value) if star else check(value)] += 1

    started = time.monotonic()
    failure = None
    try:
        prop()
    except Exception as exc:  # hypothesis re-raises the shrunk failing example
        failure = f"{type(exc).__name__}: {str(exc)[:2000]}"
    return TargetResult(name, sum(outcomes.values()), outcomes, time.monotonic() - started, failure)
