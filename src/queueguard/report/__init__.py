"""Renderings of the commands' JSON documents for people (pure): the pull-request comment
(`--output markdown`) of `plan`, `rehearse`, `verify` and `lint`, and the units every text
shows (`report.units`).

Each renderer is a function of the command's JSON document alone (what `--output json`
prints), so a comment is deterministic apart from the measured figures the document holds,
never shows a path of the machine that made it or a date, and a stored document renders the
same comment anywhere (the golden files of `tests/report/`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from queueguard.errors import UsageError

__all__ = ["COMMANDS", "comment"]

#: the commands that render a comment
COMMANDS = ("plan", "rehearse", "verify", "lint")


def comment(command: str, doc: dict[str, Any]) -> str:
    """The pull-request comment of `command`'s JSON document."""
    return _renderer(command)(doc)


def _renderer(command: str) -> Callable[[dict[str, Any]], str]:
    from queueguard.report import lint, plan, rehearse, verify

    renderers: dict[str, Callable[[dict[str, Any]], str]] = {
        "plan": plan.markdown,
        "rehearse": rehearse.markdown,
        "verify": verify.markdown,
        "lint": lint.markdown,
    }
    if command not in renderers:
        raise UsageError(f"--output markdown is for {', '.join(COMMANDS)}, not {command}")
    return renderers[command]
