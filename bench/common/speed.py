"""What the speed benchmarks next to a native tool share (`bench.engine.alembic_speed`,
`bench.engine.django_speed`): each command a process of its own, timed start to exit, and
the table of each command's fastest round and median ratio to the native command."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path


def log(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)


def timed(argv: list[str], cwd: Path, env: dict[str, str] | None = None) -> float:
    """Seconds from the process's start to its exit; a failure ends the benchmark."""
    started = time.perf_counter()
    done = subprocess.run(
        argv, cwd=cwd, capture_output=True, text=True, env=env or os.environ.copy()
    )
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({done.returncode}):\n{done.stderr[-2000:]}")
    return seconds


def rows(times: dict[str, list[float]], commands: list[tuple[str, str, str]]) -> list[str]:
    """One table row per (name, label, goal): fastest, every round, fastest ÷ native's
    fastest, median of the per-round ratios to native."""
    found = []
    for name, label, goal in commands:
        ratios = [t / n for t, n in zip(times[name], times["native"], strict=True)]
        each = ", ".join(f"{t:.2f}" for t in times[name])
        found.append(
            f"| {label} | {min(times[name]):.2f} s | {each} | "
            f"{min(times[name]) / min(times['native']):.2f}× | "
            f"{statistics.median(ratios):.2f}× | {goal} |"
        )
    return found
