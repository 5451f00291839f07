"""migration.row_loop: data moves in set-based statements, not per-row loops.

A revision holds its ACCESS EXCLUSIVE locks until it commits, so a loop that touches one row
(or one batch) per iteration turns a lock held for seconds into one held for rows × round
trips (the "monstrous function" no reviewer can bound). Every PL/pgSQL loop — `FOR … LOOP`,
`FOREACH … LOOP`, `WHILE … LOOP`, a bare `LOOP` — contains the keyword LOOP, so the rule
reads the body of each `DO` block and `CREATE FUNCTION/PROCEDURE` (comments and strings such
as dynamic SQL blanked) and reports every loop at its head. `LANGUAGE sql` bodies cannot loop;
bodies in other procedural languages (plpython3u, plperl, plv8, …) are searched for
`for`/`while`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from queueguard.lint.model import Corpus, Finding, Rule, Span, Statement, scan

CODE = "migration.row_loop"
HINT = (
    "move the data in one set-based statement (UPDATE … FROM, INSERT … SELECT with "
    "row_number(), DELETE … USING), as migrations/sql/004/03_relocate.sql does"
)
_FLAGS = re.IGNORECASE | re.DOTALL
_DO = re.compile(r"\s*DO\b", _FLAGS)
_ROUTINE = re.compile(r"\s*CREATE\s+(?:OR\s+REPLACE\s+)?(?P<kind>FUNCTION|PROCEDURE)\b", _FLAGS)
_LANGUAGE = re.compile(r"\bLANGUAGE\s+(\w+)", _FLAGS)
_LANGUAGE_QUOTED = re.compile(r"\bLANGUAGE\s+$", _FLAGS)
_PLPGSQL_WORDS = re.compile(
    r"\bEND\s+LOOP\b|\b(?P<word>LOOP|FOR|FOREACH|WHILE|THEN|ELSE|BEGIN|DECLARE)\b|;", _FLAGS
)
_OTHER_LOOPS = re.compile(r"\b(?:for|while|foreach)\b")
_NOT_BODIES = ("c", "internal")


def check(corpus: Corpus) -> Iterator[Finding]:
    for file in corpus.migration_files:
        for stmt in file.statements:
            yield from _check_statement(stmt)


def _check_statement(stmt: Statement) -> Iterator[Finding]:
    if _DO.match(stmt.clean):
        where, default = "a DO block", "plpgsql"
    elif match := _ROUTINE.match(stmt.clean):
        where, default = f"a {match.group('kind').lower()} body", "sql"
    else:
        return
    body = max(stmt.literals, key=lambda s: s.content_end - s.content_start, default=None)
    if body is None:  # a SQL-standard BEGIN ATOMIC body: SQL, which cannot loop
        return
    language = _language(stmt, body) or default
    if language == "sql" or language in _NOT_BODIES:
        return
    for offset, head in _loops(stmt.file.text[body.content_start : body.content_end], language):
        shape = f"{head} … END LOOP" if language == "plpgsql" else head
        yield stmt.file.finding(
            CODE,
            body.content_start + offset,
            f"loop ({shape}) in {where}: a migration moves data in set-based statements, "
            "not row by row",
            HINT,
        )


def _language(stmt: Statement, body: Span) -> str | None:
    """The LANGUAGE clause: `LANGUAGE plpgsql`, or `LANGUAGE 'plpgsql'` (a literal)."""
    for match in _LANGUAGE.finditer(stmt.clean):
        # In the cleaned text a blanked literal looks like whitespace: the raw text between
        # LANGUAGE and the name must really be whitespace.
        if stmt.text[match.start() : match.start(1)].strip().upper() == "LANGUAGE":
            return match.group(1).lower()
    file = stmt.file
    for span in stmt.literals:
        if span != body and _LANGUAGE_QUOTED.search(file.clean[stmt.start : span.start]):
            return file.text[span.content_start : span.content_end].lower()
    return None


def _loops(body: str, language: str) -> Iterator[tuple[int, str]]:
    """(offset in the body, loop head keyword) of every loop."""
    clean, _ = scan(body)
    if language != "plpgsql":
        for match in _OTHER_LOOPS.finditer(clean):
            yield match.start(), match.group(0)
        return
    pending: tuple[int, str] | None = None
    for match in _PLPGSQL_WORDS.finditer(clean):
        word = (match.group("word") or "").upper()
        if word in ("FOR", "FOREACH", "WHILE"):
            pending = pending or (match.start(), word)
        elif word == "LOOP":
            yield pending or (match.start(), "LOOP")
            pending = None
        else:  # END LOOP, `;`, THEN, ELSE, BEGIN, DECLARE end any pending loop head
            pending = None


RULE = Rule(CODE, "data-moving statements are set-based (no per-row loops)", check)
