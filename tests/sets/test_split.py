"""queueguard.sets.split: SQL text → the statements a server receives one by one.

Each golden pair is NAME.sql (read as bytes, so CRLF and a BOM reach the splitter) and NAME.json
(the statements). The pairs were checked once against psql 18 (`psql -f` with log_statement=all):
they agree except where this splitter deliberately differs: it drops chunks that hold no
statement (psql sends `;` and `/* … */;` as empty queries), and it continues an E-string across
lines as the server's lexer does (escape_strings; psql lexes line by line and misses it).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from queueguard.errors import SplitError, UsageError
from queueguard.sets.split import split, statement_lines

GOLDEN = Path(__file__).parent / "split_golden"
PAIRS = sorted(GOLDEN.glob("*.sql"))


def read(path: Path) -> str:
    return path.read_bytes().decode("utf-8")  # not read_text: it would turn CRLF into LF


def test_golden_pairs_are_complete() -> None:
    assert len(PAIRS) >= 12
    assert {p.stem for p in GOLDEN.glob("*.json")} == {p.stem for p in PAIRS}
    assert "\r\n" in read(GOLDEN / "crlf.sql")  # .gitattributes keeps the bytes
    assert read(GOLDEN / "bom_no_newline.sql").startswith("\ufeff")


@pytest.mark.parametrize("sql", PAIRS, ids=lambda p: p.stem)
def test_golden(sql: Path) -> None:
    assert split(read(sql)) == json.loads(sql.with_suffix(".json").read_text(encoding="utf-8"))


def test_statement_lines_name_the_first_token() -> None:
    text = "-- header\nSELECT 1;\n\n/* note */ SELECT\n  2; SELECT 3\r\n;\rSELECT 4"
    assert statement_lines(text) == [
        (2, "SELECT 1"),
        (4, "/* note */ SELECT\n  2"),  # a block comment stays, as psql sends it
        (5, "SELECT 3"),
        (7, "SELECT 4"),  # \r\n is one line break, a lone \r is one too
    ]


def test_semicolon_inside_parentheses_does_not_end_the_statement() -> None:
    # psql counts parentheses; the server reads `(a; b)` as one statement (a rule's actions)
    assert split("SELECT (1;\n2); SELECT 3") == ["SELECT (1;\n2)", "SELECT 3"]
    assert split("SELECT 1); SELECT 2") == ["SELECT 1)", "SELECT 2"]  # `)` never goes below 0


def test_begin_atomic_needs_create_function_or_procedure() -> None:
    # CREATE TABLE is no routine: its BEGIN (a column name) opens nothing
    assert split("CREATE TABLE t (a int) ; BEGIN; SELECT 1; END;") == [
        "CREATE TABLE t (a int)",
        "BEGIN",
        "SELECT 1",
        "END",
    ]
    # in a routine, BEGIN inside parentheses is not a block
    assert split("CREATE FUNCTION f(begin int) RETURNS int RETURN 1; SELECT 2") == [
        "CREATE FUNCTION f(begin int) RETURNS int RETURN 1",
        "SELECT 2",
    ]
    # CASE nests only inside a BEGIN
    body = "CREATE PROCEDURE p() BEGIN ATOMIC SELECT CASE WHEN x THEN 1 END; END"
    assert split(body + "; SELECT 2") == [body, "SELECT 2"]


@pytest.mark.parametrize(
    ("text", "line", "problem"),
    [
        ("SELECT 1;\nSELECT 'open;\n", 2, "unterminated quoted string '"),
        ("SELECT E'it\\';\n", 1, "unterminated quoted string E'"),
        ("SELECT E'ends in a backslash\\", 1, "unterminated quoted string E'"),
        ("SELECT U&'x;", 1, "unterminated quoted string U&'"),
        ('\n\nCREATE TABLE "odd;\n(a int);', 3, "unterminated quoted identifier"),
        ("DO $$\nBEGIN\nEND;\n", 1, "unterminated dollar-quoted string $$"),
        ("SELECT 1;\nSELECT $a$ x $b$;\n", 2, "unterminated dollar-quoted string $a$"),
        ("SELECT 1; /* a /* b */ c;\n", 1, "unterminated /* comment"),
        ("SELECT 1;\n\\set ON_ERROR_STOP on\nSELECT 2;", 2, "psql meta-command \\set"),
        ("\\connect queueguard\n", 1, "psql meta-command \\connect"),
        ("SELECT 1 \\gset\n", 1, "psql meta-command \\gset"),
    ],
)
def test_split_errors(text: str, line: int, problem: str) -> None:
    with pytest.raises(SplitError) as caught:
        split(text)
    assert caught.value.line == line
    assert caught.value.problem.startswith(problem)
    assert str(caught.value).startswith(f"line {line}: ")


def test_split_error_is_a_usage_error_naming_the_source() -> None:
    with pytest.raises(UsageError, match=r"^v1\.2/schema\.sql:2: unterminated /\* comment$"):
        split("SELECT 1;\n/* open", source="v1.2/schema.sql")


def test_nothing_to_split() -> None:
    assert split("") == []
    assert split("\ufeff \n-- only a comment") == []
    assert split(";;\n;") == []


# Pieces of migration text; each is complete (no open quote), so any sequence of them joined
# by spaces splits (joined by nothing, `SELECT$$` would be one identifier).
PIECES = [
    "SELECT",
    " ",
    "\n",
    "\r\n",
    ";",
    "(",
    ")",
    "x",
    "e",
    "$1",
    "a$b",
    "'a;b'",
    "E'\\';'",
    "'it''s'",
    '"q;"',
    "$$ ; $$",
    "$t$ $$ ; $t$",
    "/* ; /* ; */ */",
    "-- ;\n",
    "CREATE",
    "FUNCTION",
    "OR",
    "REPLACE",
    "PROCEDURE",
    "BEGIN",
    "CASE",
    "END",
    "ATOMIC",
]


@given(st.lists(st.sampled_from(PIECES), max_size=40).map(" ".join))
def test_split_joined_statements_split_alike(text: str) -> None:
    statements = split(text)
    # "\n;\n": the newline ends a -- comment a statement may end with
    assert split("\n;\n".join(statements)) == statements
    assert all(s and s == s.strip(" \t\r\n\f") for s in statements)


@given(st.text())
def test_split_reads_any_text_or_says_why(text: str) -> None:
    try:
        statements = statement_lines(text)
    except SplitError as e:
        assert 1 <= e.line <= text.count("\n") + text.count("\r") + 1
    else:
        lines = [line for line, _ in statements]
        assert lines == sorted(lines)
