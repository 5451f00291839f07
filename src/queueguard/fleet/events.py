"""What a fleet run tells as it goes: one line per state change on stderr, `--events FILE`
(one JSON line per change, appended) and `--metrics FILE` (the run's figures per wave and
state in the Prometheus text format, for node_exporter's textfile collector: written to a
temporary file renamed over FILE, so the collector never reads half a file). No password
is in any of them: targets are named, and DSNs are never part of an event."""

from __future__ import annotations

import json
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from queueguard.errors import UsageError

#: the metrics file is rewritten at most this often while the run goes (and at its end)
METRICS_EVERY_S = 5.0


class Events:
    def __init__(
        self,
        events: Path | None = None,
        metrics: Path | None = None,
        board: Callable[[], list[tuple[Any, ...]]] | None = None,
        lines: Callable[[str], None] | None = None,
    ) -> None:
        self.events = events
        self.metrics = metrics
        self.board = board
        self.lines = lines if lines is not None else _stderr
        self._lock = threading.Lock()
        self._written = 0.0
        if metrics is not None:
            require_metrics()

    def emit(
        self,
        run: int,
        runner: str,
        target: str,
        wave: str | None,
        state: str,
        fence: int | None,
        revision: str | None,
        error: str | None,
        note: str | None = None,
    ) -> None:
        line = f"fleet: {target}: {state}"
        if revision:
            line += f" at {revision}"
        if note:
            line += f" ({note})"
        if error:
            line += f": {error}"
        with self._lock:
            self.lines(line)
            if self.events is not None:
                doc = {
                    "schemaVersion": 1,
                    "time": datetime.now(UTC).isoformat(timespec="milliseconds"),
                    "run": run, "runner": runner, "target": target, "wave": wave,
                    "state": state, "fence": fence, "revision": revision, "error": error,
                }  # fmt: skip
                with self.events.open("a", encoding="utf-8") as out:
                    out.write(json.dumps(doc) + "\n")
        if time.monotonic() - self._written >= METRICS_EVERY_S:
            self.write_metrics()

    def write_metrics(self) -> None:
        if self.metrics is None or self.board is None:
            return
        with self._lock:
            self._written = time.monotonic()
            write_metrics(self.metrics, self.board())


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def require_metrics() -> None:
    try:
        import prometheus_client  # noqa: F401
    except ImportError:
        raise UsageError(
            "--metrics needs prometheus-client: pip install 'queueguard[fleet]'"
        ) from None


def write_metrics(path: Path, rows: list[tuple[Any, ...]]) -> None:
    """Per wave and state: targets, seconds spent, lock waits, retries (attempts after the
    first) — not a series per target."""
    from prometheus_client import CollectorRegistry, Gauge, write_to_textfile

    registry = CollectorRegistry()
    labels = ["wave", "state"]
    targets = Gauge("queueguard_fleet_targets", "Targets of the run", labels, registry=registry)
    seconds = Gauge("queueguard_fleet_target_seconds", "Seconds the targets took, summed",
                    labels, registry=registry)  # fmt: skip
    waits = Gauge("queueguard_fleet_lock_waits", "Lock timeouts retried on the ladder",
                  labels, registry=registry)  # fmt: skip
    retries = Gauge("queueguard_fleet_retries", "Claims after a target's first", labels,
                    registry=registry)  # fmt: skip
    sums: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0, 0.0, 0, 0])
    for row in rows:
        # board columns: name, wave, wave name, state, revision, error, attempts, elapsed_ms,
        # predicted_ms, fence, dsn, schema, running_ms, expired, lock waits
        key = (row[2] or "", row[3])
        s = sums[key]
        s[0] += 1
        s[1] += (row[7] or row[12] or 0) / 1000
        s[2] += row[14] or 0
        s[3] += max(0, (row[6] or 0) - 1)
    for (wave, state), (n, secs, lock_waits, again) in sums.items():
        targets.labels(wave, state).set(n)
        seconds.labels(wave, state).set(secs)
        waits.labels(wave, state).set(lock_waits)
        retries.labels(wave, state).set(again)
    write_to_textfile(str(path), registry)
