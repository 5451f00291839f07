"""What a revision creates and drops, read from its statements (pure): the evidence a
half-applied version is judged by."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import psycopg
import pytest

from queueguard.engine.apply.half_applied import (
    Found,
    _body,
    _unquote,
    dropped,
    found,
    objects,
    refuse,
)
from queueguard.errors import HalfApplied
from queueguard.sets import MigrationSet, Revision


def test_created_objects_with_their_tolerance_per_object() -> None:
    assert objects("ALTER TABLE t ADD COLUMN IF NOT EXISTS a int, ADD COLUMN b int") == [
        ("column", "t.a", "int", True),
        ("column", "t.b", "int", False),
    ]
    assert objects(
        "ALTER TABLE ev\n  ADD COLUMN Bool01 BOOLEAN GENERATED ALWAYS AS (x) STORED"
    ) == [("column", "ev.Bool01", "BOOLEAN", False)]
    assert objects("CREATE INDEX CONCURRENTLY IF NOT EXISTS ix ON t (a)") == [
        ("index", "ix", None, True)
    ]
    assert objects("CREATE TABLE x (a int, CONSTRAINT c CHECK (a > 0))") == [
        ("table", "x", None, False)
    ]
    assert objects("ALTER TABLE t ADD CONSTRAINT c CHECK (a > 0)") == []
    assert objects("-- a comment\nCREATE UNIQUE INDEX u ON t (a)") == [("index", "u", None, False)]


def test_dropped_objects() -> None:
    assert dropped("ALTER TABLE current_executions DROP COLUMN data_encoding") == [
        ("column", "current_executions.data_encoding")
    ]
    assert dropped("DROP TABLE IF EXISTS a, b CASCADE") == [("table", "a"), ("table", "b")]
    assert dropped("DROP INDEX CONCURRENTLY IF EXISTS ix") == [("index", "ix")]
    assert dropped("ALTER TABLE t DROP CONSTRAINT c") == []


def test_index_definitions_compare_without_their_names() -> None:
    assert _body("CREATE INDEX a ON public.t USING btree (x)") == "btree (x)"
    assert _body("CREATE UNIQUE INDEX b ON t USING btree (x)") == "UNIQUE btree (x)"
    # the first USING is the access method's: a predicate may spell it again
    assert (
        _body("CREATE INDEX c ON t USING btree (x) WHERE (note = ' USING ')")
        == "btree (x) WHERE (note = ' USING ')"
    )


def test_each_kind_of_created_object_and_its_name_as_written() -> None:
    assert objects('CREATE UNLOGGED TABLE "Odd".t2 (a int)') == [("table", '"Odd".t2', None, False)]
    assert objects("CREATE TABLE IF NOT EXISTS t (a int)") == [("table", "t", None, True)]
    # only IF NOT EXISTS before the column list counts: not a default's text
    assert objects("CREATE TABLE t (a text DEFAULT 'x IF NOT EXISTS y')") == [
        ("table", "t", None, False)
    ]
    assert objects("CREATE TABLE t (a text DEFAULT 'IF NOT EXISTS', b varchar(3))") == [
        ("table", "t", None, False)
    ]
    assert objects("CREATE SEQUENCE IF NOT EXISTS s") == [("sequence", "s", None, True)]
    assert objects("CREATE MATERIALIZED VIEW mv AS SELECT 1") == [("view", "mv", None, False)]
    assert objects("CREATE VIEW v AS SELECT 1") == [("view", "v", None, False)]
    assert objects("CREATE TYPE mood AS ENUM ('a')") == [("type", "mood", None, False)]
    assert objects("CREATE FUNCTION f() RETURNS int LANGUAGE sql AS 'SELECT 1'") == [
        ("function", "f", None, False)
    ]
    assert objects("CREATE PROCEDURE p() LANGUAGE sql AS ''") == [("function", "p", None, False)]
    assert objects("INSERT INTO t VALUES (1)") == []
    assert objects("ALTER TABLE t RENAME TO u") == []


def test_added_columns_with_their_declared_types() -> None:
    assert objects(
        "ALTER TABLE s.t ADD c  character   varying(10) NOT NULL DEFAULT 'x',"
        " ADD PRIMARY KEY (c), add constraint k CHECK (c <> ''), ADD COLUMN d int"
    ) == [
        ("column", "s.t.c", "character varying(10)", False),
        ("column", "s.t.d", "int", False),
    ]


def test_each_kind_of_dropped_object() -> None:
    assert dropped("DROP MATERIALIZED VIEW mv") == [("view", "mv")]
    assert dropped("drop view v") == [("view", "v")]
    assert dropped("DROP FUNCTION f(int)") == [("function", "f")]
    assert dropped("DROP TABLE a ,  b") == [("table", "a"), ("table", "b")]
    assert dropped("ALTER TABLE t DROP COLUMN IF EXISTS c, drop constraint k, DROP d") == [
        ("column", "t.c"),
        ("column", "t.d"),
    ]
    assert dropped("INSERT INTO t VALUES (1)") == []


def test_names_as_the_catalog_spells_them() -> None:
    assert _unquote('"My""T".Col') == 'My"T.col'
    assert _unquote("Public.TemporalChangeVersion") == "public.temporalchangeversion"


def test_objects_dropped_first_or_created_if_not_exists_are_not_looked_up() -> None:
    """No object here is evidence, so none is looked up (there is no connection to ask)."""
    rev = Revision(
        "2",
        "1",
        "fix",
        (Path("V2__fix.sql"),),
        "x",
        (
            "DROP VIEW v",
            "CREATE TABLE v (a int)",  # a view dropped, a table of its name created
            "DROP INDEX ix",
            'CREATE INDEX "IX" ON t (a)',
            "ALTER TABLE t DROP COLUMN c",
            "ALTER TABLE t ADD COLUMN C int",
            "CREATE SEQUENCE IF NOT EXISTS s",
        ),
    )
    assert found(cast(Any, None), rev) == []


def test_only_temporal_and_sqldir_sets_are_checked() -> None:
    rev = Revision("1", None, "x", (Path("1.py"),), "x", ("CREATE TABLE t (a int)",))
    for fmt in ("alembic", "queueguard"):
        refuse(cast(Any, None), MigrationSet(fmt, Path("/set"), (rev,)), rev)


def test_a_found_object_says_what_it_is_and_the_verdict() -> None:
    line = Found("table", "t", "CREATE TABLE t (a int)", "matches what it would create").line()
    assert line == "table t exists (matches what it would create)"


# --- on a server: each kind of object found, and compared -------------------------------------

EXISTING = [
    "CREATE TABLE t (id int PRIMARY KEY, a text, b varchar(10))",
    "CREATE TABLE w (id int NOT NULL, n text)",
    "CREATE INDEX t_a ON t (a)",
    "CREATE SEQUENCE s",
    "CREATE VIEW v AS SELECT 1 AS x",
    "CREATE TYPE mood AS ENUM ('a')",
    "CREATE FUNCTION f() RETURNS int LANGUAGE sql AS 'SELECT 1'",
]


@pytest.fixture
def conn(empty_db: str) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(empty_db, autocommit=True) as setup:
        for statement in EXISTING:
            setup.execute(statement)  # type: ignore[arg-type]
    with psycopg.connect(empty_db) as connection:
        yield connection


def test_each_existing_object_is_found_and_compared(conn: psycopg.Connection[Any]) -> None:
    rev = Revision(
        "2",
        "1",
        "x",
        (Path("2.sql"),),
        "x",
        (
            "CREATE TABLE t (id int PRIMARY KEY, a text, b varchar(10))",
            "CREATE TABLE w (id bigint)",
            "CREATE TABLE u (x int)",  # not there: no evidence
            "CREATE TABLE public.w (x nosuchtype)",
            "CREATE SEQUENCE s",
            "CREATE VIEW v AS SELECT 1 AS x",
            "CREATE TYPE mood AS ENUM ('a')",
            "CREATE FUNCTION public.f() RETURNS int LANGUAGE sql AS 'SELECT 1'",
            "CREATE FUNCTION g() RETURNS int LANGUAGE sql AS 'SELECT 1'",
            "ALTER TABLE t ADD COLUMN b varchar(10), ADD COLUMN c int, ADD a int",
            "ALTER TABLE t ADD COLUMN id nosuchtype",
            "CREATE INDEX t_a ON t (a)",
            "CREATE UNIQUE INDEX t_a ON t (a)",
            "CREATE INDEX t_id ON t (id)",
            "CREATE TABLE public.w (id int NOT NULL, n text)",
            "ALTER TABLE public.t ADD COLUMN b varchar(10)",
            "CREATE INDEX t_a",
            "CREATE INDEX t_a ON t (nosuchcolumn)",
            "DROP TABLE t_a",  # a table of the index's name: the index is still evidence
            "CREATE INDEX t_a ON t (a)",
        ),
    )
    assert [f.line() for f in found(conn, rev)] == [
        "table t exists (matches what it would create)",
        "table w exists (differs: it has (id integer NOT NULL, n text), the revision would "
        "create (id bigint))",
        'table public.w exists (cannot be compared: type "nosuchtype" does not exist)',
        "sequence s exists (cannot be compared: only its existence is checked)",
        "view v exists (cannot be compared: only its existence is checked)",
        "type mood exists (cannot be compared: only its existence is checked)",
        "function public.f exists (cannot be compared: only its existence is checked)",
        "column t.b exists (matches what it would create)",
        "column t.a exists (differs: it is text, the revision would make it integer)",
        'column t.id exists (cannot be compared: type "nosuchtype" does not exist)',
        "index t_a exists (matches what it would create)",
        "index t_a exists (differs: it is `CREATE INDEX t_a ON public.t USING btree (a)`)",
        "table public.w exists (matches what it would create)",
        "column public.t.b exists (matches what it would create)",
        "index t_a exists (cannot be compared: the statement was not understood)",
        'index t_a exists (cannot be compared: column "nosuchcolumn" does not exist)',
        "index t_a exists (matches what it would create)",
    ]
    assert [f.statement for f in found(conn, rev)][:2] == list(rev.statements or ())[:2]
    # every probe was rolled back: nothing of it is left, and the transaction is usable
    row = conn.execute(
        "SELECT to_regnamespace('queueguard_probe') IS NULL,"
        " to_regclass('pg_temp.queueguard_probe') IS NULL"
    ).fetchone()
    assert row == (True, True)


def test_a_half_applied_sqldir_revision_is_refused_naming_its_objects(
    conn: psycopg.Connection[Any],
) -> None:
    rev = Revision(
        "3",
        "2",
        "x",
        (Path("3_x.sql"),),
        "x",
        ("CREATE SEQUENCE s", "CREATE INDEX t_a ON t (a)", "CREATE TABLE u (x int)"),
    )
    with pytest.raises(HalfApplied) as caught:
        refuse(conn, MigrationSet("sqldir", Path("/set"), (rev,)), rev)
    assert str(caught.value) == (
        "revision 3 looks half applied (by another tool?): the version row has not moved, no "
        "progress of ours is recorded, and 2 of its objects exist already:\n"
        "  sequence s exists (cannot be compared: only its existence is checked)\n"
        "  index t_a exists (matches what it would create)\n"
        "nothing was changed; finish or undo that version by hand (or restore a backup), "
        "then rerun"
    )
    # a revision none of whose objects exist passes
    fresh = Revision("4", "3", "x", (Path("4_x.sql"),), "x", ("CREATE TABLE u (x int)",))
    refuse(conn, MigrationSet("temporal", Path("/set"), (fresh,)), fresh)


def test_the_probe_table_resolves_names_on_the_sessions_search_path(
    conn: psycopg.Connection[Any],
) -> None:
    conn.execute("CREATE SCHEMA other")
    conn.execute("CREATE TYPE other.size AS ENUM ('s', 'm')")
    conn.execute("CREATE TABLE public.sized (s other.size)")
    conn.execute("SET search_path = other, public")
    rev = Revision("2", "1", "x", (Path("2.sql"),), "x", ("CREATE TABLE sized (s size)",))
    assert [f.line() for f in found(conn, rev)] == [
        "table sized exists (matches what it would create)"
    ]


def test_a_half_applied_temporal_version_is_refused(conn: psycopg.Connection[Any]) -> None:
    rev = Revision("1.1", "1.0", "x", (Path("a.sql"),), "x", ("CREATE SEQUENCE s",))
    with pytest.raises(HalfApplied, match=r"revision 1\.1 looks half applied"):
        refuse(conn, MigrationSet("temporal", Path("/set"), (rev,)), rev)


def test_a_schema_whose_quoted_name_holds_a_dot(conn: psycopg.Connection[Any]) -> None:
    conn.execute('CREATE SCHEMA "odd.s"')
    conn.execute('CREATE TABLE "odd.s".q (a int)')
    conn.execute("CREATE FUNCTION \"odd.s\".g() RETURNS int LANGUAGE sql AS 'SELECT 1'")
    conn.execute('SET search_path = "odd.s", public')
    rev = Revision(
        "2",
        "1",
        "x",
        (Path("2.sql"),),
        "x",
        (
            'CREATE TABLE "odd.s".q (a int)',
            "CREATE FUNCTION \"odd.s\".g() RETURNS int LANGUAGE sql AS 'SELECT 1'",
        ),
    )
    # the quoted schema's dot is its own: the names are shown whole
    assert [(f.kind, f.name, f.verdict) for f in found(conn, rev)] == [
        ("table", "odd.s.q", "matches what it would create"),
        ("function", "odd.s.g", "cannot be compared: only its existence is checked"),
    ]
