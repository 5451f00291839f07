"""pg_dump output that loads on every supported major."""

from __future__ import annotations

import re

# Lines that vary by pg_dump major or run: psql's \restrict keys (pg_dump 18), version banners,
# and settings an older server rejects (transaction_timeout exists from PostgreSQL 17).
_DROP_LINE_PREFIXES = (
    "\\restrict",
    "\\unrestrict",
    "-- Dumped from",
    "-- Dumped by",
    "SET transaction_timeout",
)


#: a column's options as pg_dump sets them: `ALTER TABLE ONLY t ALTER COLUMN c SET (…);`
_COLUMN_OPTIONS = re.compile(r"^(ALTER TABLE .* ALTER COLUMN .* SET \()(.*)(\);)$")
#: a per-column stamp PostgreSQL 15.20 (Debian 15.20-0+deb12u1) keeps among a column's
#: options and pg_dump prints: it differs between two databases the same DDL reached at
#: different moments, as an OID does, and says nothing about the schema
_STAMPS = ("pg_attver=",)


def normalise_dump(text: str) -> str:
    """Drop the lines above and the stamps among column options; everything else is kept
    byte for byte."""
    lines = []
    for line in text.splitlines():
        if line.startswith(_DROP_LINE_PREFIXES):
            continue
        found = _COLUMN_OPTIONS.match(line) if "pg_attver=" in line else None
        if found is not None:
            kept = [o for o in found[2].split(", ") if not o.startswith(_STAMPS)]
            if not kept:
                continue
            line = f"{found[1]}{', '.join(kept)}{found[3]}"
        lines.append(line)
    return "\n".join(lines).strip() + "\n"


#: psql's `\restrict KEY` and `\unrestrict KEY`, which pg_dump writes around a dump since
#: PostgreSQL 17.6 and 18 (psql then refuses other meta-commands in between)
_RESTRICT = re.compile(r"^\\(?:un)?restrict [A-Za-z0-9]+[ \t]*$", re.MULTILINE)


def without_restrict(text: str) -> str:
    """A dump read statement by statement, not by psql: its `\restrict` lines blanked
    (each line kept, so a line number still points where it did)."""
    return _RESTRICT.sub("", text)
