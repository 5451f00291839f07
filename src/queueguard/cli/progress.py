"""How a long online phase reports itself: a progress bar on a terminal, plain lines
otherwise (at most one every few seconds per step), on stderr."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TextIO

from queueguard.queue_schema.online.report import Progress

BAR = 28


def _eta(seconds: float | None) -> str:
    if seconds is None:
        return ""
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f", ETA {hours}h{minutes:02d}m" if hours else f", ETA {minutes}m{secs:02d}s"


def line(event: Progress) -> str:
    rate = f", {event.rate:,.0f}/s" if event.rate else ""
    if event.total:
        share = min(event.done / event.total, 1.0)
        return (
            f"{event.phase} {event.step}: {event.done:,}/{event.total:,} ({share:.0%})"
            f"{rate}{_eta(event.eta_s)}"
        )
    return f"{event.phase} {event.step}: {event.done:,}{rate}"


class Reporter:
    """`tell` for `queueguard.queue_schema.online.run`."""

    def __init__(
        self,
        stream: TextIO | None = None,
        every_s: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()
        self.every_s = every_s
        self.clock = clock
        # When each step last printed a line. A step that never printed has no entry: the
        # monotonic clock's zero is arbitrary (the boot on Linux), so 0.0 cannot mean "never".
        self._last: dict[str, float] = {}
        self._bar_open = False

    def __call__(self, event: Progress | str) -> None:
        if isinstance(event, str):
            self._end_bar()
            print(f"  {event}", file=self.stream, flush=True)
            return
        if self.tty:
            self._bar(event)
            return
        key, now = f"{event.phase}/{event.step}", self.clock()
        last = self._last.get(key)
        if last is None or now - last >= self.every_s:
            self._last[key] = now
            print(f"  {line(event)}", file=self.stream, flush=True)

    def _bar(self, event: Progress) -> None:
        filled = int(BAR * min(event.done / event.total, 1.0)) if event.total else 0
        bar = "#" * filled + "-" * (BAR - filled) if event.total else "." * (event.done % BAR)
        self.stream.write(f"\r  [{bar:<{BAR}}] {line(event)}\033[K")
        self.stream.flush()
        self._bar_open = True

    def _end_bar(self) -> None:
        if self._bar_open:
            self.stream.write("\n")
            self._bar_open = False

    def close(self) -> None:
        self._end_bar()
