"""Fresh install vs upgraded through every revision; each revision's released schema."""

from __future__ import annotations

import psycopg
import pytest

from queueguard.engine import catalog

from .released_schemas import RELEASED
from .seeds import seed_executions, seed_spool, seed_user_data
from .support import ALL, MakeDb, assert_same_catalog, execute, protocol, revision, up


def test_fresh_install_equals_upgrade_through_every_revision_with_data(make_db: MakeDb) -> None:
    fresh = make_db()
    assert up(fresh).applied == ALL
    upgraded = make_db()
    up(upgraded, to="001")
    seed_executions(upgraded)
    seed_spool(upgraded)
    up(upgraded, to="002")
    seed_user_data(upgraded)
    up(upgraded, to="003")
    execute(upgraded, "UPDATE task_queues SET last_task_id = 1 WHERE version = 'dep.v1'")
    up(upgraded, to="004")
    assert revision(fresh) == revision(upgraded) == "004"
    assert_same_catalog(
        catalog.introspect(fresh), catalog.introspect(upgraded), "fresh install vs 001→004"
    )


def test_catalog_diff_is_readable(make_db: MakeDb) -> None:
    a, b = make_db(), make_db()
    up(a, to="003")
    up(b, to="004")
    lines = catalog.diff(catalog.introspect(a), catalog.introspect(b))
    assert "+ tables queueguard_migrations: table" in lines
    assert any(line.startswith("+ columns queueguard_migrations:") for line in lines)
    assert catalog.diff(catalog.introspect(b), catalog.introspect(b)) == []
    execute(b, "ALTER TABLE tasks ALTER COLUMN data DROP NOT NULL")
    execute(b, "ALTER INDEX runtime_protocol_single_row RENAME TO renamed_is_not_a_difference")
    execute(
        b,
        "CREATE FUNCTION touch() RETURNS trigger LANGUAGE plpgsql AS 'BEGIN RETURN NEW; END';"
        "CREATE TRIGGER some_name BEFORE UPDATE ON tasks FOR EACH ROW EXECUTE FUNCTION touch();"
        "CREATE SEQUENCE loose_seq",
    )
    lines = catalog.diff(catalog.introspect(a), catalog.introspect(b))
    assert "~ columns tasks.data: jsonb NOT NULL != jsonb" in lines
    assert not any("renamed_is_not_a_difference" in line for line in lines)
    assert any(line.startswith("+ functions touch(): CREATE OR REPLACE FUNCTION") for line in lines)
    assert "+ triggers tasks: CREATE TRIGGER BEFORE UPDATE ON tasks FOR EACH ROW EXECUTE " in (
        "\n".join(lines)
    )
    assert any(line.startswith("+ sequences loose_seq: bigint START 1") for line in lines)


@pytest.mark.parametrize("rev", ALL)
def test_each_revision_reproduces_the_released_schema(make_db: MakeDb, rev: str) -> None:
    dsn = make_db()
    up(dsn, to=rev)
    cat = catalog.introspect(dsn)
    expected_columns, expected_keys = RELEASED[rev]
    assert set(cat.tables) == set(expected_columns)
    for table, columns in expected_columns.items():
        found = {name: (c.type, c.nullable, c.default) for name, c in cat.columns[table].items()}
        assert found == columns, table
        # NOT NULL is checked through the columns (PostgreSQL 18 also lists it as constraints).
        defined = {k for k in cat.constraints.get(table, ()) if not k.startswith("NOT NULL")}
        assert defined == expected_keys.get(table, set()), table
    assert cat.triggers == {} and cat.functions == {} and cat.views == {}  # no triggers at all
    # The spool's bigserial goes with the v0.1 table in 003.
    assert set(cat.sequences) == ({"owned by tasks.delivery_id"} if rev < "003" else set())
    if rev >= "003":
        assert cat.indexes["runtime_protocol"] == {
            "CREATE UNIQUE INDEX ON public.runtime_protocol USING btree ((true))"
        }
        assert protocol(dsn) == ([(3, 3)] if rev == "003" else [(4, 4)])
        with pytest.raises(psycopg.errors.UniqueViolation):
            execute(dsn, "INSERT INTO runtime_protocol VALUES (1, 9)")
