"""Numbers and lists as a person reads them (pure): durations with their unit, counts with
their noun, lists in words, lock modes as SQL names them.

Every text and Markdown rendering uses these, so a figure reads the same everywhere and no
Python value (`None`, `[]`, `{'min': 3}`) reaches a reader.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

_CAMEL = re.compile(r"(?<!^)(?=[A-Z])")


def duration_ms(ms: float | None, *, unknown: str = "unknown") -> str:
    """`0.4` → `< 1 ms`, `31.4` → `31 ms`, `1234` → `1.2 s`, `90000` → `1.5 min`."""
    if ms is None:
        return unknown
    if ms < 1:
        return "< 1 ms"
    if ms < 1000:
        return f"{ms:.0f} ms"
    if ms < 60_000:
        return f"{ms / 1000:.1f} s"
    return f"{ms / 60_000:.1f} min"


def duration_s(seconds: float | None, *, unknown: str = "unknown") -> str:
    """The same for a figure in seconds."""
    return duration_ms(None if seconds is None else seconds * 1000, unknown=unknown)


def count(n: int, noun: str, plural: str | None = None) -> str:
    """`1 statement`, `2 statements`, `0 statements` (`plural` for irregular nouns)."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"


def words(items: Iterable[object], *, empty: str = "none") -> str:
    """`a, b and c`; `empty` (e.g. "no drift") when there is nothing."""
    names = [str(i) for i in items]
    if not names:
        return empty
    if len(names) == 1:
        return names[0]
    return f"{', '.join(names[:-1])} and {names[-1]}"


def listing(items: Iterable[object], *, empty: str = "none") -> str:
    """`a, b, c` (ids, tables: where "and" would read as part of a name); `empty` if none."""
    names = [str(i) for i in items]
    return ", ".join(names) if names else empty


def lock_mode(pg_mode: str) -> str:
    """`AccessExclusiveLock` (pg_locks) → `ACCESS EXCLUSIVE` (SQL's LOCK … IN … MODE)."""
    return _CAMEL.sub(" ", pg_mode.removesuffix("Lock")).upper()


def size_bytes(n: float | None) -> str:
    """`512 B`, `48 kB`, `1.4 GB`: PostgreSQL's pg_size_pretty units, one decimal past kB."""
    if n is None:
        return "unknown"
    if n < 1024:
        return f"{int(n)} B"
    for unit, scale in (("kB", 2**10), ("MB", 2**20), ("GB", 2**30), ("TB", 2**40)):
        if n < scale * 1024 or unit == "TB":
            value = n / scale
            return f"{value:.0f} {unit}" if unit == "kB" else f"{value:.1f} {unit}"
    return f"{n} B"
