"""Load named SQL statements from packaged `.sql` files.

A file holds statements separated by `-- name: NAME` headers (procrastinate's layout); the
text up to the next header belongs to NAME. Comments before the first header are ignored.
"""

from __future__ import annotations

import re
from functools import cache
from importlib.resources import files

_HEADER = re.compile(r"^-- name: ([a-z_][a-z0-9_]*)\s*$", re.MULTILINE)


def parse_named(text: str) -> dict[str, str]:
    """Split a named-statement file into {name: sql}; duplicate names are an error."""
    parts = _HEADER.split(text)
    queries: dict[str, str] = {}
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        if name in queries:
            raise ValueError(f"duplicate query name {name!r}")
        queries[name] = body.strip()
    return queries


@cache
def queries(package: str, filename: str) -> dict[str, str]:
    """The named statements of `sql/<filename>` inside `package`."""
    text = files(package).joinpath("sql", filename).read_text(encoding="utf-8")
    return parse_named(text)
