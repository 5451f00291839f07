"""What a revision creates and drops, read from its statements (pure): the evidence a
half-applied version is judged by."""

from __future__ import annotations

from queueguard.upgrade.foreign.half_applied import _body, dropped, objects


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
