"""Re-targeting SQL text at the shadow schema by PostgreSQL's own scanner (pure): a
schema-qualified name `S.X` whose X moves with the table becomes `queueguard_shadow.X`.

The text is edited in place, token by token, rather than parsed and printed again: what
pg_dump wrote (expressions, casts, collations, storage options) reaches the shadow exactly
as it would reach the table, and a string literal or a comment is one token, never matched."""

from __future__ import annotations

from collections.abc import Collection

from pglast import parser

_DOT = "ASCII_46"


def identifier(text: str) -> str | None:
    """The name a token spells (quoted: as written; bare: folded to lower case), or None
    for a token that is no name (an operator, a literal, punctuation)."""
    if text.startswith('"') and text.endswith('"') and len(text) >= 2:
        return text[1:-1].replace('""', '"')
    if text[:1].isalpha() or text[:1] == "_":
        return text.lower() if all(ch.isalnum() or ch in "_$" for ch in text) else None
    return None


def retarget(sql: str, schema: str, names: Collection[str], into: str) -> str:
    """`sql` with every `schema.name` (name in `names`) qualified by `into` instead."""
    tokens = parser.scan(sql)
    edits: list[tuple[int, int]] = []  # (start, end) of the schema token to replace
    for i in range(len(tokens) - 2):
        first, dot, last = tokens[i], tokens[i + 1], tokens[i + 2]
        if dot.name != _DOT or (i > 0 and tokens[i - 1].name == _DOT):
            continue
        if identifier(sql[first.start : first.end + 1]) != schema:
            continue
        if identifier(sql[last.start : last.end + 1]) in names:
            edits.append((first.start, first.end + 1))
    for start, end in reversed(edits):
        sql = sql[:start] + into + sql[end:]
    return sql


def name_end(sql: str, start: int) -> int:
    """Where the (possibly qualified) name starting at `start` ends."""
    tokens = [t for t in parser.scan(sql) if t.start >= start]
    end = tokens[0].end + 1
    i = 1
    while i + 1 < len(tokens) and tokens[i].name == _DOT:
        end = tokens[i + 1].end + 1
        i += 2
    return end
