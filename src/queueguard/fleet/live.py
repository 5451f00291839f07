"""The board redrawn in place on a terminal while `fleet upgrade` runs (rich, from the
`fleet` extra): per wave the targets in each state, the targets running now, and the last
state changes. In a pipe, or without rich, the run says one line per change instead."""

from __future__ import annotations

import sys
import threading
from collections import deque
from collections.abc import Callable
from typing import Any

from queueguard.fleet import board
from queueguard.fleet.control import STATES
from queueguard.sets import MigrationSet

#: how often the board is read from the control database and redrawn
REFRESH_S = 1.0
#: the state changes shown under the board
RECENT = 8


def available() -> bool:
    """A terminal to draw on, and rich to draw with."""
    if not sys.stderr.isatty():
        return False
    try:
        import rich  # noqa: F401
    except ImportError:
        return False
    return True


def render(doc: dict[str, Any], recent: list[str]) -> Any:
    """The board as rich renderables (pure: a function of the board's document)."""
    from rich.console import Group
    from rich.table import Table

    waves = Table(title=f"fleet run {doc['run']}", title_justify="left")
    waves.add_column("wave")
    for state in STATES:
        waves.add_column(state, justify="right")
    for wave in doc["waves"]:
        waves.add_row(wave["name"], *(str(wave["states"].get(s, 0)) for s in STATES))
    running = Table(title="running", title_justify="left")
    for column in ("target", "wave", "time", ""):
        running.add_column(column)
    for t in doc["targets"]:
        if t["state"] == "running":
            took = f"{(t['ms'] or 0) / 1000:.1f} s"
            mark = "late" if t["late"] else ("lease expired" if t["leaseExpired"] else "")
            running.add_row(t["name"], t["wave"] or "", took, mark)
    return Group(waves, running, *recent[-RECENT:])


class LiveBoard:
    """Redraws the board every REFRESH_S from `rows()`; `line` takes the run's state-change
    lines (shown under it)."""

    def __init__(
        self,
        run: int,
        rows: Callable[[], list[tuple[Any, ...]]],
        mset: MigrationSet | None = None,
    ) -> None:
        from rich.console import Console
        from rich.live import Live

        self.run = run
        self.rows = rows
        self.mset = mset  # the run's set: its board's document is the one printed at the end
        self.recent: deque[str] = deque(maxlen=RECENT)
        self.live = Live(console=Console(stderr=True), auto_refresh=False)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True, name="board")

    def line(self, text: str) -> None:
        self.recent.append(text)

    def __enter__(self) -> LiveBoard:
        self.live.start()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)
        self._draw()
        self.live.stop()

    def _loop(self) -> None:
        while not self._stop.wait(REFRESH_S):
            self._draw()

    def _draw(self) -> None:
        try:
            doc = board.document(self.run, self.rows(), mset=self.mset)
        except Exception:  # a missed redraw: the next one comes in a second
            return
        self.live.update(render(doc, list(self.recent)), refresh=True)
