"""Terminal colours: only on a TTY, never with NO_COLOR set, never in JSON."""

from __future__ import annotations

import os
from typing import TextIO

_CODES = {"red": "31", "yellow": "33", "green": "32", "dim": "2", "bold": "1"}
SEVERITY = {"blocking": "red", "warning": "yellow", "info": "dim"}


def wants_color(stream: TextIO) -> bool:
    """Colour when the stream is a terminal and the user did not opt out (no-color.org)."""
    return stream.isatty() and not os.environ.get("NO_COLOR")


def paint(text: str, color: str, enabled: bool) -> str:
    return f"\033[{_CODES[color]}m{text}\033[0m" if enabled else text
