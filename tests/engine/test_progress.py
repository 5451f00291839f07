"""engine.apply.progress: the `queueguard_progress` rows of revisions split by a statement
that runs outside a transaction, read and written directly on a scratch database."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from queueguard.engine.apply import progress
from queueguard.sets import Revision


def revision(id: str, *statements: str) -> Revision:
    return Revision(id, None, id, (Path(f"{id}.sql"),), "x", statements)


def test_the_checksum_pins_the_statements_in_order() -> None:
    a = revision("1", "CREATE TABLE a (x int)", "CREATE INDEX CONCURRENTLY ON a (x)")
    expected = hashlib.sha256(
        b"CREATE TABLE a (x int)\x00CREATE INDEX CONCURRENTLY ON a (x)"
    ).hexdigest()
    assert progress.checksum(a) == expected
    swapped = revision("1", "CREATE INDEX CONCURRENTLY ON a (x)", "CREATE TABLE a (x int)")
    assert progress.checksum(swapped) != expected
    # joined, not concatenated: where one statement ends is part of what is pinned
    assert progress.checksum(revision("1", "ab", "c")) != progress.checksum(
        revision("1", "a", "bc")
    )
    empty = hashlib.sha256(b"").hexdigest()
    assert progress.checksum(revision("1")) == empty
    python = Revision("2", None, "2", (Path("2.py"),), "x", None)
    assert progress.checksum(python) == empty


@pytest.fixture
def conn(empty_db: str) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(empty_db) as connection:
        yield connection


def has_table(conn: psycopg.Connection[Any]) -> bool:
    row = conn.execute("SELECT to_regclass('queueguard_progress') IS NOT NULL").fetchone()
    return bool(row and row[0])


def test_rows_are_written_read_and_cleared_with_the_table(conn: psycopg.Connection[Any]) -> None:
    a = revision("a", "CREATE TABLE a (x int)", "CREATE INDEX CONCURRENTLY ON a (x)")
    b = revision("b", "CREATE TABLE b (x int)")
    assert progress.read(conn) == {}
    assert progress.in_flight(conn) is None
    assert progress.committed(conn, a) == 0
    progress.clear(conn, a)  # nothing to clear: no table, no error
    assert not has_table(conn)

    progress.write(conn, a, 1)
    progress.write(conn, b, 0)
    assert progress.read(conn) == {"a": (1, progress.checksum(a)), "b": (0, progress.checksum(b))}
    assert progress.in_flight(conn) is None  # no statement begun online
    progress.write(conn, a, 2)  # moved past the next statement
    assert progress.read(conn)["a"] == (2, progress.checksum(a))
    conn.commit()
    assert progress.committed(conn, a) == 2
    assert progress.committed(conn, revision("c")) == 0

    progress.clear(conn, a)
    assert progress.read(conn) == {"b": (0, progress.checksum(b))}
    assert has_table(conn)  # b's row is left
    progress.clear(conn, b)
    assert not has_table(conn)  # the last row takes the table with it


def test_a_statement_in_flight_online_and_its_forms_done(conn: psycopg.Connection[Any]) -> None:
    a = revision("a", "CREATE TABLE a (x int)", "ALTER TABLE a ALTER x TYPE bigint")
    progress.write(conn, a, 1, '["copy", "swap"]')
    assert progress.in_flight(conn) == ("a", 1, '["copy", "swap"]', 0)
    progress.write_step(conn, a, 1)
    assert progress.in_flight(conn) == ("a", 1, '["copy", "swap"]', 1)
    # the same statement with the same forms again (a rerun) keeps how far its forms got
    progress.write(conn, a, 1, '["copy", "swap"]')
    assert progress.in_flight(conn) == ("a", 1, '["copy", "swap"]', 1)
    progress.write_forms(conn, a, '["copy2", "swap2"]')
    assert progress.in_flight(conn) == ("a", 1, '["copy2", "swap2"]', 1)
    # other forms start again from the first
    progress.write(conn, a, 1, '["other"]')
    assert progress.in_flight(conn) == ("a", 1, '["other"]', 0)
    progress.write(conn, a, 2)
    assert progress.in_flight(conn) is None
    assert progress.read(conn) == {"a": (2, progress.checksum(a))}


def test_a_table_from_before_online_has_nothing_in_flight(conn: psycopg.Connection[Any]) -> None:
    conn.execute(
        "CREATE TABLE queueguard_progress (revision text PRIMARY KEY, statement int NOT NULL,"
        " sha256 text NOT NULL, updated_at timestamptz NOT NULL DEFAULT now())"
    )
    conn.execute("INSERT INTO queueguard_progress VALUES ('a', 1, 'x')")
    assert progress.in_flight(conn) is None
    assert progress.read(conn) == {"a": (1, "x")}
    # writing adds the columns of the online forms to the older table
    progress.write(conn, revision("a", "SELECT 1"), 1, '["f"]')
    assert progress.in_flight(conn) == ("a", 1, '["f"]', 0)
