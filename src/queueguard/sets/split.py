"""Split SQL text into the statements a server receives one by one, as psql reads a file.

What can hide a `;` follows PostgreSQL's lexer (src/backend/parser/scan.l): quoted strings,
quoted identifiers, dollar-quotes and comments. Whether a `;` ends a statement follows psql's
lexer (src/fe_utils/psqlscan.l): not inside parentheses (`CREATE RULE … DO ALSO (a; b)` is one
statement) and not inside the `BEGIN ATOMIC … END` body of CREATE FUNCTION/PROCEDURE. Nothing
else is recognised: numbers, operators and keywords pass through untouched, so this is one loop
over the text, not a parser. standard_conforming_strings is taken as on (the default since 9.1).

Checked against psql 18 (`psql -f`, statements as the server logged them). Two differences are
on purpose: chunks without a statement (`;;`, `/* only a comment */;`) are dropped where psql
sends empty queries, and an E-string continued on the next line (`E'a'` newline `'\\';'`) stays
one string, as the server's lexer reads it; psql lexes line by line and would cut it.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Callable

from queueguard.errors import SplitError

__all__ = ["SplitError", "code_of", "is_transaction_control", "split", "statement_lines"]

# scan.l's {space}. Not str.strip()'s default set: PostgreSQL reads e.g. U+00A0 as an
# identifier character (every byte >= 0x80 is one), so it must stay in the statement.
_SPACE = " \t\n\r\f"
_ID_START = r"A-Za-z_\x80-\U0010ffff"
_ID_CONT = _ID_START + "0-9"

# One token at a position that is not whitespace or a comment; anything else is one character
# that cannot hide a `;` (operators, digits, punctuation, a `$` that starts no quote).
_TOKEN = re.compile(
    # E'…': the only string where a backslash escapes the next character (`\'`, `\\`)
    r"(?P<estring>[eE]')"
    # '…', B'…', X'…', N'…', U&'…': `''` is a quote, a backslash is just a character
    r"|(?P<string>(?:[bBxXnN]|[uU]&)?')"
    r'|(?P<qident>(?:[uU]&)?")'
    # $$ or $tag$; the tag may not start with a digit (`$1` is a parameter) nor hold a `$`
    rf"|(?P<dollar>\$(?:[{_ID_START}][{_ID_CONT}]*)?\$)"
    # an identifier or keyword; `$` continues one, so `a$b$` is one word, not a quote start
    rf"|(?P<word>[{_ID_START}][{_ID_CONT}$]*)"
)
_STRING_BODY = re.compile(r"[^']*+(?:''[^']*+)*+'")
_ESTRING_BODY = re.compile(r"(?:[^'\\]++|\\.|'')*+'", re.DOTALL)
_QIDENT_BODY = re.compile(r'[^"]*+(?:""[^"]*+)*+"')
_BODY = {"estring": _ESTRING_BODY, "string": _STRING_BODY, "qident": _QIDENT_BODY}
# scan.l's {quotecontinue}: a string followed by whitespace holding a newline and another quote
# goes on in the same kind (`E'a'` newline `'\';'` is one E-string: `\'` escapes, `;` is inside).
# Possessive quantifiers keep a failed match linear (a `-- ------` comment would backtrack).
_CONTINUE = re.compile(r"(?:[ \t\f]|--[^\n\r]*+)*+[\n\r](?:[ \t\n\r\f]|--[^\n\r]*+[\n\r])*+'")
_COMMENT_MARK = re.compile(r"/\*|\*/")
_NEWLINE = re.compile(r"\r\n|\r|\n")
# scan.l's {whitespace}: spaces and -- comments (which end at \n or \r, or at the end)
_BLANK = re.compile(r"(?:[ \t\n\r\f]++|--[^\n\r]*+)++")
_META = re.compile(r"\\[^ \t\n\r\f]*")

# psql's BEGIN … END tracking applies to statements whose first identifiers are these
_ROUTINE_HEADS = {
    ("create", "function"),
    ("create", "procedure"),
    ("create", "or", "replace", "function"),
    ("create", "or", "replace", "procedure"),
}


def split(text: str, *, source: str | None = None) -> list[str]:
    """The statements of `text` in order, each as PostgreSQL would receive it: the statement's
    text without its terminating semicolon, with surrounding whitespace stripped; comments inside
    a statement are kept; chunks that hold only whitespace/comments are dropped (a trailing
    comment after the last `;` is not a statement). A final statement without `;` is kept.
    Like psql, whitespace and `--` comments before a statement are not part of it; a `/* */`
    comment before it is.

    Raises SplitError (naming `source` and the line) for an unterminated quote, dollar-quote or
    block comment, and for a psql meta-command (`\\set`, `\\connect`): a server does not read
    them, so a migration file must not hold them."""
    return [statement for _, statement in statement_lines(text, source=source)]


def statement_lines(text: str, *, source: str | None = None) -> list[tuple[int, str]]:
    """`split(text)` with the 1-based line of each statement's first token (a `/* */` comment
    before the statement is part of its text but not where it starts)."""
    text = text.removeprefix("\ufeff")
    # a line ends at \n, \r\n or a lone \r (scan.l takes either character as a newline)
    breaks = [m.end() for m in _NEWLINE.finditer(text)]

    def line_at(offset: int) -> int:
        return bisect_right(breaks, offset) + 1

    def fail(offset: int, problem: str) -> SplitError:
        return SplitError(line_at(offset), problem, source)

    statements: list[tuple[int, str]] = []
    chunk = 0  # where the current statement's text begins
    started = False  # psql's query buffer is not empty: chunk no longer moves
    first: int | None = None  # its first token; None while it holds only whitespace/comments
    parens = 0  # psql's paren_depth: a `;` inside parentheses does not end the statement
    begins = 0  # psql's begin_depth: open BEGIN (and CASE within one) of a routine body
    words: list[str] = []  # the statement's first four identifiers, lowercased
    i, n = 0, len(text)
    while i < n:
        blank = _BLANK.match(text, i)
        if blank:
            i = blank.end()
            if not started:  # psql drops whitespace and -- comments before a statement
                chunk = i
            continue
        started, c = True, text[i]
        if text.startswith("/*", i):
            after = _end_of_comment(text, i)
            if after is None:
                raise fail(i, "unterminated /* comment")
            i = after
            continue
        if c == ";" and parens == 0 and begins == 0:
            if first is not None:
                statements.append((line_at(first), text[chunk:i].rstrip(_SPACE)))
            chunk, started, first, words = i + 1, False, None, []
            i += 1
            continue
        if first is None:
            first = i
        if c == "\\":
            # psql reads a backslash outside quotes as a meta-command; the server, as an error
            command = _META.match(text, i)
            raise fail(i, f"psql meta-command {command[0] if command else c} is not SQL")
        m = _TOKEN.match(text, i)
        if m is None:
            if c == "(":
                parens += 1
            elif c == ")" and parens > 0:
                parens -= 1
            i += 1
        elif m.lastgroup == "word":
            i = m.end()
            word = m[0].lower() if m[0].isascii() else m[0]
            if len(words) < 4:
                words.append(word)
            begins = _routine_depth(words, word, parens, begins)
        else:
            i = _end_of_quote(text, m, fail)
    if first is not None:
        statements.append((line_at(first), text[chunk:].rstrip(_SPACE)))
    return statements


def _routine_depth(words: list[str], word: str, parens: int, begins: int) -> int:
    """psql's begin_depth after `word`, psql's heuristic word for word: in CREATE [OR REPLACE]
    FUNCTION|PROCEDURE, BEGIN opens a block that END closes (CASE … END nests within one), so
    the `;`s of a BEGIN ATOMIC body stay inside; a plain `BEGIN;` is no such statement."""
    if parens == 0 and (tuple(words[:2]) in _ROUTINE_HEADS or tuple(words) in _ROUTINE_HEADS):
        if word == "begin" or (word == "case" and begins > 0):
            return begins + 1
        if word == "end" and begins > 0:
            return begins - 1
    return begins


def _end_of_quote(text: str, m: re.Match[str], fail: Callable[[int, str], SplitError]) -> int:
    """The offset after the dollar-quoted string, quoted string or quoted identifier whose
    opening token is `m`."""
    if m.lastgroup == "dollar":
        # the body is opaque up to the same tag; other tags inside are plain text
        close = text.find(m[0], m.end())
        if close < 0:
            raise fail(m.start(), f"unterminated dollar-quoted string {m[0]}")
        return close + len(m[0])
    pattern = _BODY[m.lastgroup or ""]
    end = pattern.match(text, m.end())
    # a quoted identifier has no continuation (scan.l's xd state has no xqs)
    while m.lastgroup != "qident" and end and (more := _CONTINUE.match(text, end.end())):
        end = pattern.match(text, more.end())
    if end is None:
        what = "quoted identifier" if m.lastgroup == "qident" else "quoted string"
        raise fail(m.start(), f"unterminated {what} {m[0]}…")
    return end.end()


def _end_of_comment(text: str, start: int) -> int | None:
    """The offset after the `*/` closing the block comment at `start` (None: unterminated);
    comments nest (`/* a /* b */ c */` is one)."""
    depth = 0
    for mark in _COMMENT_MARK.finditer(text, start):
        depth += 1 if mark[0] == "/*" else -1
        if depth == 0:
            return mark.end()
    return None


#: transaction control in a migration file: whoever applies the set owns the transaction, so
#: these are left out (a COMMIT would end a revision's transaction half way)
_CONTROL = re.compile(
    r"^(BEGIN|START\s+TRANSACTION|COMMIT|END|ROLLBACK|ABORT)(\s+(WORK|TRANSACTION))?"
    r"(\s+ISOLATION\s+LEVEL\s+.*|\s+READ\s+(WRITE|ONLY))?\s*$",
    re.IGNORECASE | re.DOTALL,
)
_LEADING_COMMENTS = re.compile(r"^(\s*(--[^\n]*\n|/\*.*?\*/))*\s*", re.DOTALL)


def code_of(statement: str) -> str:
    """A statement without the comments before it (block comments do not nest here, which
    is enough for a leading header)."""
    return _LEADING_COMMENTS.sub("", statement, count=1)


def is_transaction_control(statement: str) -> bool:
    """BEGIN, COMMIT, ROLLBACK, … (not `BEGIN ATOMIC`, which is inside a routine's text)."""
    return bool(_CONTROL.match(code_of(statement)))
