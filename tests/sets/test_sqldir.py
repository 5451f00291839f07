"""sets.sqldir: a folder of plain `.sql` files as a line of revisions, and its ledger.

The folder tests are pure (files in tmp_path); the ledger tests run on a scratch database.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from queueguard.errors import UsageError
from queueguard.sets import sqldir


def write(root: Path, files: dict[str, str]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (root / name).write_text(text, encoding="utf-8")
    return root


# --- file names ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "version", "title"),
    [
        ("001_create.sql", "001", "create"),
        ("20240105120000_add_index.sql", "20240105120000", "add index"),
        ("7-dash_name.sql", "7", "dash name"),
        ("42.sql", "42", ""),
        ("V1__init.sql", "1", "init"),
        ("V1.1__more_tables.sql", "1.1", "more tables"),
        ("V2_1__x.sql", "2.1", "x"),
        ("000001_init.up.sql", "000001", "init"),
        ("003_ trailing_ .sql", "003", "trailing"),
    ],
)
def test_versions_and_titles_from_file_names(name: str, version: str, title: str) -> None:
    assert sqldir._version_of(Path("/set") / name) == (version, title)


def test_down_files_are_not_forward_migrations() -> None:
    assert sqldir._version_of(Path("/set/000001_init.down.sql")) is None


@pytest.mark.parametrize("name", ["R__views.sql", "U1__undo.sql", "U12__undo.sql"])
def test_flyway_repeatable_and_undo_files_are_refused(name: str) -> None:
    with pytest.raises(UsageError, match="repeatable and undo migrations are not supported"):
        sqldir._version_of(Path("/set") / name)


@pytest.mark.parametrize("name", ["Update__x.sql", "U__x.sql"])
def test_a_name_starting_like_an_undo_file_but_not_one_is_not_refused_as_one(name: str) -> None:
    with pytest.raises(UsageError, match="no version in the file name"):
        sqldir._version_of(Path("/set") / name)


@pytest.mark.parametrize("name", ["create.sql", "V__x.sql", "x001.sql", "001x.sql"])
def test_a_name_without_a_version_is_refused(name: str) -> None:
    with pytest.raises(UsageError, match=r"no version in the file name \(expected e\.g\."):
        sqldir._version_of(Path("/set") / name)


def test_versions_compare_as_numbers_part_by_part() -> None:
    assert sqldir.order("001") == (1,)
    assert sqldir.order("1.10") == (1, 10)
    assert sqldir.order("2") < sqldir.order("10")
    assert sqldir.order("1.9") < sqldir.order("1.10") < sqldir.order("2")


# --- the folder ------------------------------------------------------------------------------


def test_detect_needs_a_sql_file(tmp_path: Path) -> None:
    assert not sqldir.detect(tmp_path)
    (tmp_path / "001_x.sql").mkdir()  # a folder named like a file is not one
    assert not sqldir.detect(tmp_path)
    (tmp_path / "notes.txt").write_text("x")
    assert not sqldir.detect(tmp_path)
    (tmp_path / "002_y.sql").write_text("SELECT 1;")
    assert sqldir.detect(tmp_path)


def test_load_orders_by_version_and_links_each_revision_to_the_one_before(tmp_path: Path) -> None:
    root = write(
        tmp_path,
        {
            "10_last.sql": "CREATE TABLE c (a int);",
            "2_second.sql": "CREATE TABLE b (a int);\nCREATE INDEX ON b (a);",
            "1_first.sql": "CREATE TABLE a (a int);",
            "1_first.down.sql": "DROP TABLE a;",
            "README.txt": "not a migration",
        },
    )
    mset = sqldir.load(root)
    assert mset.format == "sqldir"
    assert mset.root == root
    assert mset.ids == ("1", "2", "10")
    assert [r.down for r in mset.revisions] == [None, "1", "2"]
    assert [r.title for r in mset.revisions] == ["first", "second", "last"]
    assert [r.files for r in mset.revisions] == [
        (root / "1_first.sql",),
        (root / "2_second.sql",),
        (root / "10_last.sql",),
    ]
    assert mset.revisions[1].statements == ("CREATE TABLE b (a int)", "CREATE INDEX ON b (a)")
    raw = (root / "10_last.sql").read_bytes()
    assert mset.revisions[2].checksum == hashlib.sha256(raw).hexdigest()
    assert mset.bookkeeping == {sqldir.LEDGER}
    assert mset.order is sqldir.order
    # the database may be at a version the folder no longer lists: ordered by number
    assert [r.id for r in mset.pending("3")] == ["10"]


def test_a_file_without_a_title_is_titled_by_its_name(tmp_path: Path) -> None:
    root = write(tmp_path, {"5.sql": "SELECT 1;"})
    assert sqldir.load(root).revisions[0].title == "5.sql"


def test_the_same_version_twice_is_refused_naming_both_files(tmp_path: Path) -> None:
    root = write(tmp_path, {"1_a.sql": "SELECT 1;", "001_b.sql": "SELECT 2;"})
    with pytest.raises(UsageError, match=r"version 1 twice \(001_b\.sql, 1_a\.sql\)"):
        sqldir.load(root)


def test_a_folder_of_only_down_files_has_no_migrations(tmp_path: Path) -> None:
    root = write(tmp_path, {"000001_init.down.sql": "DROP TABLE a;"})
    with pytest.raises(UsageError, match=r"no \.sql migration files"):
        sqldir.load(root)


def test_a_sql_folder_is_not_read_as_a_file(tmp_path: Path) -> None:
    root = write(tmp_path, {"1_a.sql": "SELECT 1;"})
    (root / "2_b.sql").mkdir()
    assert sqldir.load(root).ids == ("1",)


# --- the ledger ------------------------------------------------------------------------------


@pytest.fixture
def conn(empty_db: str) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(empty_db) as connection:
        yield connection


def test_the_ledger_records_applied_files_and_finds_tampering(
    conn: psycopg.Connection[Any], tmp_path: Path
) -> None:
    root = write(
        tmp_path,
        {"1_a.sql": "SELECT 1;", "2_b.sql": "SELECT 2;", "10_c.sql": "SELECT 10;"},
    )
    mset = sqldir.load(root)
    assert sqldir.applied(conn) == {}
    assert sqldir.current(conn) is None
    assert sqldir.tampered(conn, mset) == []
    sqldir.ensure_ledger(conn)
    assert sqldir.applied(conn) == {}
    assert sqldir.current(conn) is None
    for revision in mset.revisions:
        sqldir.record(conn, revision)
    assert sqldir.applied(conn) == {r.id: r.checksum for r in mset.revisions}
    assert sqldir.current(conn) == "10"  # by number, not as text ("2" > "10")
    assert sqldir.tampered(conn, mset) == []

    (root / "2_b.sql").write_text("SELECT 'changed';")
    (root / "10_c.sql").unlink()
    (root / "1_a.sql").write_text("SELECT 'changed too';")
    assert sqldir.tampered(conn, sqldir.load(root)) == [
        "1_a.sql: changed since it was applied",
        "2_b.sql: changed since it was applied",
        f"10: applied, but {root} no longer has it",
    ]


def test_refusals_say_what_a_line_is_made_of() -> None:
    with pytest.raises(UsageError) as caught:
        sqldir._version_of(Path("/set/R__views.sql"))
    assert str(caught.value) == (
        "/set/R__views.sql: Flyway repeatable and undo migrations are not supported "
        "(only versioned V<n>__name.sql files form a line)"
    )
    with pytest.raises(UsageError) as caught:
        sqldir._version_of(Path("/set/create.sql"))
    assert str(caught.value) == (
        "/set/create.sql: no version in the file name (expected e.g. 001_name.sql, "
        "V1__name.sql or 000001_name.up.sql)"
    )


def test_a_file_the_splitter_refuses_is_named(tmp_path: Path) -> None:
    root = write(tmp_path, {"1_a.sql": "CREATE TABLE t (name text DEFAULT 'unterminated);"})
    with pytest.raises(UsageError) as caught:
        sqldir.load(root)
    assert str(caught.value).startswith(f"{root / '1_a.sql'}:")
