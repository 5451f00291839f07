"""The lint data model: findings, SQL files split into statements, and the corpus rules read.

A file is tokenized once with sqlglot's PostgreSQL tokenizer and split into statements on
semicolons, so every statement knows its offset in the file and every finding a
`file:line:column`. Each statement is parsed on its own: sqlglot falls back to a bare
`Command` for syntax it does not model (LOCK, DO, VACUUM, plpgsql function bodies), so the
migration rules also read a *cleaned* copy of the text in which comments and string literals
are blanked out (offsets kept), and the literal spans, which hold function and DO bodies.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

import sqlglot
from sqlglot import Token, TokenType, exp
from sqlglot.dialects.postgres import Postgres
from sqlglot.errors import SqlglotError, TokenError

Kind = Literal["migration", "audit"]
DIALECT = "postgres"


@dataclass(frozen=True)
class Finding:
    """One problem at `path:line:column`, with a stable dotted code and a fix hint."""

    code: str
    path: Path
    line: int
    column: int
    message: str
    hint: str
    #: "queueguard" for our own rules, "squawk" for findings mapped from squawk.
    source: str = "queueguard"
    #: where the statement holding it starts (line, column of its first token): what an
    #: annotation points at; None for a finding outside any statement (manifest.json)
    statement: tuple[int, int] | None = field(default=None, compare=False)

    def display_path(self, base: Path | None = None) -> str:
        """The path relative to `base` (default: the working directory) when under it."""
        base = base or Path.cwd()
        try:
            return str(self.path.relative_to(base.resolve()))
        except ValueError:
            return str(self.path)

    def render(self, base: Path | None = None) -> str:
        """`file:line:column: code message (hint: …)`."""
        where = f"{self.display_path(base)}:{self.line}:{self.column}"
        return f"{where}: {self.code} {self.message} (hint: {self.hint})"

    def as_json(self, base: Path | None = None) -> dict[str, Any]:
        return {
            "code": self.code,
            "file": self.display_path(base),
            "line": self.line,
            "column": self.column,
            "message": self.message,
            "hint": self.hint,
            "source": self.source,
        }


@dataclass(frozen=True)
class Span:
    """A string literal (quoted or dollar-quoted): its whole extent and its content."""

    start: int
    end: int
    content_start: int
    content_end: int


_DOLLAR_TAG = re.compile(r"\$([A-Za-z_][A-Za-z_0-9]*)?\$")


def scan(text: str) -> tuple[str, tuple[Span, ...]]:
    """Blank comments and string literals (newlines and offsets kept); return the literals.

    Quoted identifiers are kept: table names live in them. Handles `--` and nested `/* */`
    comments, `'…'` with doubled quotes, `E'…'` with backslash escapes and `$tag$…$tag$`.
    """
    out = list(text)
    spans: list[Span] = []
    n = len(text)

    def blank(start: int, end: int) -> None:
        for k in range(start, min(end, n)):
            if out[k] != "\n":
                out[k] = " "

    i = 0
    while i < n:
        c = text[i]
        if text.startswith("--", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            blank(i, j)
            i = j
        elif text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            blank(i, j)
            i = j
        elif c == '"':
            j = i + 1
            while j < n and not (text[j] == '"' and text[j + 1 : j + 2] != '"'):
                j += 2 if text[j] == '"' else 1
            i = j + 1
        elif c == "'":
            escapes = i > 0 and text[i - 1] in "eE" and not _word_char(text, i - 2)
            j = i + 1
            while j < n:
                if (escapes and text[j] == "\\") or text[j : j + 2] == "''":
                    j += 2
                elif text[j] == "'":
                    break
                else:
                    j += 1
            spans.append(Span(i, min(j + 1, n), i + 1, min(j, n)))
            blank(i, j + 1)
            i = j + 1
        elif c == "$" and not _word_char(text, i - 1) and (m := _DOLLAR_TAG.match(text, i)):
            close = text.find(m.group(0), m.end())
            close = n if close < 0 else close
            end = min(n, close + len(m.group(0)))
            spans.append(Span(i, end, m.end(), close))
            blank(i, end)
            i = end
        else:
            i += 1
    return "".join(out), tuple(spans)


def _word_char(text: str, k: int) -> bool:
    return 0 <= k < len(text) and (text[k].isalnum() or text[k] in "_$")


@contextmanager
def quiet_sqlglot() -> Iterator[list[str]]:
    """Collect sqlglot's warnings ("falling back to Command", …) instead of printing them."""
    logger = logging.getLogger("sqlglot")
    messages: list[str] = []

    class _Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            messages.append(record.getMessage())

    handler = _Collect(logging.WARNING)
    saved = logger.propagate
    logger.addHandler(handler)
    logger.propagate = False
    try:
        yield messages
    finally:
        logger.removeHandler(handler)
        logger.propagate = saved


@dataclass(frozen=True)
class Statement:
    """One statement of a file: its offsets and tokens, parsed on demand."""

    file: SqlFile = field(repr=False)
    start: int
    end: int
    tokens: tuple[Token, ...] = field(repr=False)

    @property
    def text(self) -> str:
        return self.file.text[self.start : self.end]

    @property
    def clean(self) -> str:
        """The text with comments and literals blanked (same offsets as `text`)."""
        return self.file.clean[self.start : self.end]

    @property
    def literals(self) -> tuple[Span, ...]:
        return tuple(s for s in self.file.literals if self.start <= s.start < self.end)

    @cached_property
    def parsed(self) -> tuple[exp.Expression | None, str | None, tuple[str, ...]]:
        """(ast, parse error, sqlglot warnings); ast is None when sqlglot cannot parse it."""
        with quiet_sqlglot() as warnings:
            try:
                ast = sqlglot.parse_one(self.text, read=DIALECT)
            except SqlglotError as exc:
                return None, str(exc).splitlines()[0], tuple(warnings)
            except RecursionError:  # pathological nesting: not parseable, so not provable
                return None, "nested too deeply for sqlglot to parse", tuple(warnings)
        if not isinstance(ast, exp.Expression):  # every concrete sqlglot node is one
            return None, f"sqlglot returned {type(ast).__name__}", tuple(warnings)
        return ast, None, tuple(warnings)

    @property
    def ast(self) -> exp.Expression | None:
        """The typed AST, or None when sqlglot cannot parse it or fell back to Command."""
        ast = self.parsed[0]
        return None if isinstance(ast, exp.Command) else ast

    def position(self, offset: int = 0) -> tuple[int, int]:
        """1-based (line, column) of an offset within the statement."""
        return self.file.position(self.start + offset)


@dataclass(frozen=True)
class SqlFile:
    """A SQL file to lint: a migration step (of `revision`, or standalone) or an audit query."""

    path: Path
    kind: Kind
    text: str
    #: "004" for migrations/sql/004/*.sql; None for a standalone file or an audit query.
    revision: str | None = None

    @classmethod
    def read(cls, path: Path, kind: Kind, revision: str | None = None) -> SqlFile:
        return cls(path.resolve(), kind, path.read_text(encoding="utf-8"), revision)

    def position(self, offset: int) -> tuple[int, int]:
        line = self.text.count("\n", 0, offset) + 1
        return line, offset - (self.text.rfind("\n", 0, offset) + 1) + 1

    @cached_property
    def _scanned(self) -> tuple[str, tuple[Span, ...]]:
        return scan(self.text)

    @property
    def clean(self) -> str:
        return self._scanned[0]

    @property
    def literals(self) -> tuple[Span, ...]:
        return self._scanned[1]

    @cached_property
    def _split(self) -> tuple[tuple[Statement, ...], str | None]:
        try:
            tokens = Postgres().tokenize(self.text)
        except TokenError as exc:
            return (), str(exc).splitlines()[0]
        statements: list[Statement] = []
        current: list[Token] = []
        for token in [*tokens, None]:
            if token is None or token.token_type == TokenType.SEMICOLON:
                if current:
                    start, end = current[0].start, current[-1].end + 1
                    statements.append(Statement(self, start, end, tuple(current)))
                current = []
            else:
                current.append(token)
        return tuple(statements), None

    @property
    def statements(self) -> tuple[Statement, ...]:
        """The statements in file order (empty when the file cannot be tokenized)."""
        return self._split[0]

    @property
    def syntax_error(self) -> str | None:
        """Why sqlglot's tokenizer rejected the file (unterminated quote, …), if it did."""
        return self._split[1]

    def finding(self, code: str, offset: int, message: str, hint: str) -> Finding:
        line, column = self.position(offset)
        return Finding(code, self.path, line, column, message, hint)


@dataclass(frozen=True)
class Corpus:
    """Everything one lint run looks at, as the rules need it."""

    #: Migration script directories (holding sql/ and manifest.json) whose hashes are checked.
    migration_roots: tuple[Path, ...] = ()
    #: Units of migration SQL that run in one transaction, in order: every step file of one
    #: non-frozen revision, or one standalone file. Frozen revisions are not here.
    migration_units: tuple[tuple[SqlFile, ...], ...] = ()
    audit_files: tuple[SqlFile, ...] = ()
    #: Step files of frozen (released before the gate) revisions: hash-checked only.
    frozen_files: tuple[SqlFile, ...] = ()

    @property
    def migration_files(self) -> tuple[SqlFile, ...]:
        return tuple(f for unit in self.migration_units for f in unit)

    @property
    def checked_files(self) -> tuple[SqlFile, ...]:
        """Files whose style is checked (silence markers apply to these)."""
        return self.migration_files + self.audit_files


def table_name(raw: str) -> str:
    """`public.Tasks` → `tasks`, `"Tasks"` → `Tasks`: the name part, folded like PostgreSQL."""
    part = raw.strip().rstrip("*").strip()
    parts = re.findall(r'"(?:[^"]|"")*"|[^."\s]+', part)
    last = parts[-1] if parts else part
    if last.startswith('"'):
        return last[1:-1].replace('""', '"')
    return last.lower()


def ast_table_name(table: exp.Expression) -> str:
    """The table name of a sqlglot Table node (schema dropped), folded like PostgreSQL."""
    ident = table.this if isinstance(table, exp.Table) else table
    if isinstance(ident, exp.Identifier):
        return str(ident.this) if ident.quoted else str(ident.this).lower()
    return table.name.lower()


@dataclass(frozen=True)
class Rule:
    """A named check over the corpus (sqlglot's style: one rule per module, an ordered list)."""

    code: str
    summary: str
    check: Callable[[Corpus], Iterable[Finding]]
    #: False for rules whose findings no inline marker may silence (safety proofs, tamper).
    silenceable: bool = True
