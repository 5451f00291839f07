"""pg_dump output that loads on every supported major."""

from __future__ import annotations

# Lines that vary by pg_dump major or run: psql's \restrict keys (pg_dump 18), version banners,
# and settings an older server rejects (transaction_timeout exists from PostgreSQL 17).
_DROP_LINE_PREFIXES = (
    "\\restrict",
    "\\unrestrict",
    "-- Dumped from",
    "-- Dumped by",
    "SET transaction_timeout",
)


def normalise_dump(text: str) -> str:
    """Drop the lines above; everything else is kept byte for byte."""
    lines = [ln for ln in text.splitlines() if not ln.startswith(_DROP_LINE_PREFIXES)]
    return "\n".join(lines).strip() + "\n"
