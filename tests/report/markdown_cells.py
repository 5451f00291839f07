"""Reading a comment back as a Markdown parser does (markdown-it-py, CommonMark with GFM
tables and inline HTML, as GitHub and GitLab render it): its tables, cell by cell, under the
heading above each; and the figures a cell shows, turned back into milliseconds."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from markdown_it import MarkdownIt
from markdown_it.token import Token

PARSER = MarkdownIt("commonmark", {"html": True}).enable("table").enable("strikethrough")
_CAMEL = re.compile(r"(?<!^)(?=[A-Z])")
_FIGURE = re.compile(r"^(?:(< 1) ms|(\d+) ms|(\d+\.\d) s|(\d+\.\d) min)$")


@dataclass
class Cell:
    """A cell's text as a reader sees it (`<br>` as a line break) and its code spans."""

    text: str
    code: list[str] = field(default_factory=list)
    strong: bool = False

    @property
    def lines(self) -> list[str]:
        return self.text.split("\n")


@dataclass
class Table:
    heading: str
    header: list[str]
    rows: list[list[Cell]]


def _cell(inline: Token) -> Cell:
    parts: list[str] = []
    cell = Cell("")
    for child in inline.children or []:
        if child.type == "text":
            parts.append(child.content)
        elif child.type == "code_inline":
            parts.append(child.content)
            cell.code.append(child.content)
        elif child.type == "html_inline" and child.content.lower().startswith("<br"):
            parts.append("\n")
        elif child.type == "strong_open":
            cell.strong = True
        elif child.type in ("softbreak", "hardbreak"):
            parts.append(" ")
    cell.text = "".join(parts)
    return cell


def tables(markdown: str) -> list[Table]:
    """Every table of the comment, with the text of the heading above it."""
    tokens = PARSER.parse(markdown)
    found: list[Table] = []
    heading = ""
    in_heading = in_cell = False
    row: list[Cell] = []
    for token in tokens:
        if token.type == "heading_open":
            in_heading = True
        elif token.type == "heading_close":
            in_heading = False
        elif token.type == "table_open":
            found.append(Table(heading, [], []))
        elif token.type == "tr_open":
            row = []
        elif token.type in ("th_open", "td_open"):
            in_cell = True
        elif token.type in ("th_close", "td_close"):
            in_cell = False
        elif token.type == "tr_close":
            if found[-1].header:
                found[-1].rows.append(row)
            else:
                found[-1].header = [c.text for c in row]
        elif token.type == "inline" and in_heading:
            heading = _cell(token).text
        elif token.type == "inline" and in_cell:
            row.append(_cell(token))
    return found


def table_under(markdown: str, heading: str, first: str | None = None) -> Table:
    """The one table under `heading` (whose first column is `first`, when given)."""
    (found,) = [
        t
        for t in tables(markdown)
        if t.heading == heading and (first is None or t.header[0] == first)
    ]
    return found


def as_ms(figure: str) -> tuple[float, float]:
    """The range of milliseconds a figure such as `< 1 ms`, `31 ms`, `1.2 s` stands for."""
    match = _FIGURE.match(figure)
    assert match, f"not a figure with its unit: {figure!r}"
    below, ms, s, minutes = match.groups()
    if below:
        return 0.0, 1.0
    if ms:
        return float(ms) - 0.5, float(ms) + 0.5
    if s:
        return float(s) * 1000 - 50, float(s) * 1000 + 50
    return float(minutes) * 60_000 - 3000, float(minutes) * 60_000 + 3000


def shows(figure: str, value: float) -> bool:
    low, high = as_ms(figure)
    return low <= value <= high


def sql_mode(pg_mode: str) -> str:
    """`AccessExclusiveLock` → `ACCESS EXCLUSIVE` (written here apart from the renderer)."""
    return " ".join(_CAMEL.split(pg_mode.removesuffix("Lock"))).upper()
