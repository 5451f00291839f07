"""`snapshot import --dsn` leaves the database as it found it when the load fails."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from queueguard.errors import QueueguardError
from queueguard.pg.connect import connection
from queueguard.queue_schema import snapshots, state

SNAPSHOT = Path(__file__).resolve().parents[2] / "fixtures" / "snapshots" / "v3_golden.json"
CATALOG = """
SELECT c.relkind::text, c.relname::text FROM pg_class c
WHERE c.relnamespace = current_schema()::regnamespace
UNION ALL
SELECT 'f', p.oid::regprocedure::text FROM pg_proc p
WHERE p.pronamespace = current_schema()::regnamespace
ORDER BY 1, 2
"""


def catalog(dsn: str) -> list[tuple[Any, ...]]:
    with connection(dsn) as conn:
        return conn.execute(CATALOG).fetchall()


class Interrupted(QueueguardError):
    pass


def failing_load(monkeypatch: pytest.MonkeyPatch) -> None:
    """The real load, which then fails before its commit (a lost server, a full disk)."""
    real = state.load_document

    def load(conn: Any, doc: Any) -> None:
        real(conn, doc)
        raise Interrupted("interrupted after loading")

    monkeypatch.setattr(state, "load_document", load)


def test_a_failed_import_into_an_empty_database_leaves_it_as_found(
    empty_db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with connection(empty_db) as conn:  # no table, so "empty"; the user's objects must stay
        conn.execute("CREATE SEQUENCE notes_seq")
        conn.execute("CREATE FUNCTION note() RETURNS int LANGUAGE sql AS 'SELECT 1'")
        conn.commit()
    before = catalog(empty_db)
    failing_load(monkeypatch)
    with pytest.raises(Interrupted):
        snapshots.import_into(empty_db, snapshots.read(SNAPSHOT))
    # no head schema, no version table, no function of ours; the user's sequence and function
    assert catalog(empty_db) == before == [("S", "notes_seq"), ("f", "note()")]


def test_a_failed_import_into_an_empty_head_database_keeps_its_schema(
    head_db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = catalog(head_db)
    doc = snapshots.read(SNAPSHOT)
    failing_load(monkeypatch)
    with pytest.raises(Interrupted):
        snapshots.import_into(head_db, doc)
    assert catalog(head_db) == before
    with connection(head_db) as conn:
        assert state.is_empty(conn)


def test_an_import_that_succeeds_keeps_what_it_installed(empty_db: str) -> None:
    snapshots.import_into(empty_db, snapshots.read(SNAPSHOT))
    assert ("r", "tasks") in catalog(empty_db)
    with connection(empty_db) as conn:
        assert not state.is_empty(conn)
