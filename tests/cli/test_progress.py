"""How a long online phase reports itself: a bar on a terminal, throttled lines otherwise."""

from __future__ import annotations

import io

from queueguard.cli.progress import Reporter, line
from queueguard.queue_schema.online.report import Progress


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_terminal_gets_one_bar_redrawn_in_place() -> None:
    out = Terminal()
    reporter = Reporter(out)
    reporter(Progress("migrate", "directives", 50, 200, 10.0))
    reporter(Progress("migrate", "directives", 100, 200, 10.0))
    reporter("migrate: done")
    text = out.getvalue()
    assert text.count("\r") == 2 and "[##############--------------]" in text
    assert "100/200 (50%)" in text and "ETA 0m10s" in text and text.endswith("migrate: done\n")


def test_a_pipe_gets_plain_lines_at_most_every_interval() -> None:
    # A clock that starts at 0, as time.monotonic() does on a machine booted a moment ago: the
    # first line of each step is printed whatever the clock reads.
    now = [0.0]
    out = io.StringIO()
    reporter = Reporter(out, every_s=5, clock=lambda: now[0])
    for done in range(10):
        reporter(Progress("migrate", "relocate", done, None))
        now[0] += 1.0
    reporter(Progress("migrate", "directives", 1, 5))
    assert out.getvalue().splitlines() == [
        "  migrate relocate: 0",
        "  migrate relocate: 5",
        "  migrate directives: 1/5 (20%)",
    ]
    assert "\r" not in out.getvalue()


def test_a_line_without_total_or_rate_says_what_it_knows() -> None:
    assert line(Progress("contract", "counters", 1234, None)) == "contract counters: 1,234"
