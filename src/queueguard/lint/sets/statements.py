"""Where each statement of a file starts, and which statement holds a finding (pure).

The statements are the ones `sets.split` cuts, as PostgreSQL receives them; squawk reports a
line and a column within the file. A statement owns the text from where it starts up to
where the next one starts, so a finding belongs to the last statement starting at or before
it (one starting before the file's first statement belongs to that first statement).
"""

from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass

from queueguard.sets.split import statement_lines

_NEWLINE = re.compile(r"\r\n|\r|\n")


@dataclass(frozen=True)
class Located:
    """One statement of a file: its index in the file, its text (as split), the 1-based line
    of its first token (what a reader is shown) and the 1-based (line, column) where its text
    begins (what findings are matched against)."""

    index: int
    sql: str
    line: int
    start: tuple[int, int]

    @property
    def column(self) -> int:
        """The column its text begins at, on its first line (1 when a comment precedes)."""
        return self.start[1] if self.start[0] == self.line else 1


def locate(text: str) -> list[Located]:
    """Every statement of `text` with its position (raises SplitError like `split`)."""
    body = text.removeprefix("\ufeff")
    breaks = [m.end() for m in _NEWLINE.finditer(body)]
    found: list[Located] = []
    cursor = 0
    for index, (line, sql) in enumerate(statement_lines(body)):
        offset = body.find(sql, cursor)  # the split text is a verbatim slice of the file
        if offset < 0:  # cannot happen for split's output; keep the first token's line
            start = (line, 1)
        else:
            cursor = offset + len(sql)
            row = bisect_right(breaks, offset)
            start = (row + 1, offset - (breaks[row - 1] if row else 0) + 1)
        found.append(Located(index, sql, line, start))
    return found


def containing(statements: list[Located], line: int, column: int) -> Located | None:
    """The statement holding the 1-based (line, column) of a finding (None: no statement)."""
    if not statements:
        return None
    starts = [s.start for s in statements]
    at = bisect_right(starts, (line, column)) - 1
    return statements[max(at, 0)]


_PLACEHOLDER = re.compile(r"%\((?:[^)]*)\)s|%s|%%")


def server_text(sql: str) -> str:
    """A statement as the driver was given it (psycopg's `%s` and `%(name)s` placeholders,
    `%%` for a literal `%`) written as the server reads it: `$1`, `$2`, … and `%` (pure). A
    traced statement keeps its placeholders; squawk parses PostgreSQL's spelling only."""
    numbers: dict[str, int] = {}

    def one(match: re.Match[str]) -> str:
        token = match.group(0)
        if token == "%%":
            return "%"
        key = token if token != "%s" else f"%s#{len(numbers)}"
        return f"${numbers.setdefault(key, len(numbers) + 1)}"

    return _PLACEHOLDER.sub(one, sql) if "%" in sql else sql
