"""Markdown for a pull-request comment (pure): escaped table cells, code spans, `<details>`,
the hidden marker a bot finds its comment by, and statements shortened for a table.

The output is GitHub- and GitLab-flavoured Markdown: pipe tables, inline HTML for
`<details>` and `<br>`. Text is escaped so that a parser gives back exactly the string of
the JSON document (a test holds every renderer to that with markdown-it-py).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from queueguard.sets.split import code_of

#: a statement longer than this is cut in its table cell and shown whole in `<details>`
SHORT = 60
#: what Markdown or inline HTML could read as syntax in running text
_SPECIAL = re.compile(r"([\\`*_\[\]<>|~#!])")
_BACKTICKS = re.compile(r"`+")
_FENCE = re.compile(r"^(`{3,}|~{3,})", re.MULTILINE)
EMPTY = "—"


def marker(command: str) -> str:
    """The hidden line a bot finds its comment by, to edit it instead of adding another
    (`<!-- queueguard:plan -->`): stable across runs, one per command."""
    return f"<!-- queueguard:{command} -->"


def text(value: str) -> str:
    """Running text, escaped: a parser shows the characters as they are, one line."""
    escaped = _SPECIAL.sub(r"\\\1", " ".join(value.split()))
    return escaped.replace("&", "&amp;")


def code(value: str) -> str:
    """An inline code span holding `value` (one line; a backtick inside lengthens the fence,
    a `|` is escaped so that it does not end a table cell, which GFM undoes in a cell)."""
    body = " ".join(value.split())
    longest = max((len(m) for m in _BACKTICKS.findall(body)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if body.startswith("`") or body.endswith("`") else ""
    return f"{fence}{pad}{body.replace('|', chr(92) + '|')}{pad}{fence}" if body else EMPTY


def lines(values: Sequence[str]) -> str:
    """Several values in one table cell, one per line (`<br>`), each escaped; `—` if none."""
    return "<br>".join(text(v) for v in values) if values else EMPTY


def shorten(sql: str, width: int = SHORT) -> str:
    """A statement as its table cell shows it: the comments before it dropped, on one line,
    cut at `width` characters with `…`."""
    flat = " ".join(code_of(sql).split())
    return flat if len(flat) <= width else flat[: width - 1].rstrip() + "…"


def is_long(sql: str, width: int = SHORT) -> bool:
    """Its table cell does not show all of it (cut, or comments dropped, or several lines)."""
    return shorten(sql, width) != sql.strip()


def table(header: Sequence[str], rows: Sequence[Sequence[str]], align: str = "") -> list[str]:
    """A pipe table; `align` has one letter per column (`l`, `r`), default left. Cells are
    already rendered (escaped text, code spans)."""
    marks = {"l": "---", "r": "---:"}
    rule = [marks[align[i]] if i < len(align) else "---" for i in range(len(header))]
    out = ["| " + " | ".join(header) + " |", "| " + " | ".join(rule) + " |"]
    out += ["| " + " | ".join(row) + " |" for row in rows]
    return out


def fenced(body: str, language: str = "") -> list[str]:
    """A fenced code block that no backtick or tilde run inside `body` can close."""
    runs = [len(m) for m in _FENCE.findall(body)]
    fence = "`" * max(3, *(r + 1 for r in runs)) if runs else "```"
    return [f"{fence}{language}", body.rstrip("\n"), fence]


def details(summary: str, body: Sequence[str]) -> list[str]:
    """A collapsed `<details>` block (blank lines around its body so that Markdown inside it
    is rendered); `summary` is escaped text."""
    return ["<details>", f"<summary>{_html(summary)}</summary>", "", *body, "", "</details>"]


def _html(value: str) -> str:
    flat = " ".join(value.split())
    return flat.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def heading(level: int, value: str) -> str:
    return f"{'#' * level} {value}"


def status(ok: bool, warn: bool = False) -> str:
    """The verdict's sign: passed, passed with something to look at, failed."""
    return "❌" if not ok else "⚠️" if warn else "✅"


def comment(verdict: str, body: Sequence[str], command: str) -> str:
    """A whole comment: the verdict on its first line (what a notification shows), the body,
    the hidden marker last."""
    body = list(body)
    while body and not body[-1]:
        body.pop()
    return "\n".join([verdict, "", *body, *([""] if body else []), marker(command)]) + "\n"
