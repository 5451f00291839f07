"""Command lines: `queueguard upgrade --sql`, alembic's own CLI, refused invocations."""

from __future__ import annotations

import os
import subprocess

import pytest

from queueguard.engine import catalog
from queueguard.queue_schema.runner import upgrade

from .released_schemas import V4_COLUMNS
from .support import (
    ALEMBIC,
    ROOT,
    MakeDb,
    assert_same_catalog,
    execute,
    revision,
    rows,
    run_cli,
    up,
)


def test_upgrade_sql_renders_without_connecting(make_db: MakeDb) -> None:
    result = run_cli("upgrade", "--sql", "--dsn", "postgresql://nobody@127.0.0.1:1/nowhere")
    assert result.returncode == 0, result.stderr
    sql = result.stdout
    for table in V4_COLUMNS:
        assert f"CREATE TABLE {table} (" in sql
    assert "UPDATE task_queues SET range_id = range_id + 1;" in sql
    assert "UPDATE runtime_protocol SET min_protocol = 4, max_protocol = 4;" in sql
    assert "-- guard (run by queueguard under these locks)" in sql
    # What the DBA reviews is what runs: applied by hand, it builds the same schema.
    by_hand, by_runner = make_db(), make_db()
    execute(by_hand, sql)
    up(by_runner)
    assert revision(by_hand) == "004"
    assert_same_catalog(catalog.introspect(by_runner), catalog.introspect(by_hand), "--sql")


def test_alembic_command_line_upgrades_an_empty_database(empty_db: str, head_db: str) -> None:
    result = subprocess.run(
        [ALEMBIC, "-c", "alembic.ini", "-x", f"dsn={empty_db}", "upgrade", "head"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env={k: v for k, v in os.environ.items() if k != "QUEUEGUARD_DSN"},
    )
    assert result.returncode == 0, result.stderr
    assert revision(empty_db) == "004"
    assert len(rows(empty_db, "SELECT * FROM queueguard_migrations")) == 4
    assert_same_catalog(catalog.introspect(head_db), catalog.introspect(empty_db), "alembic CLI")


def test_tables_without_a_version_table_are_refused(empty_db: str) -> None:
    from queueguard.errors import UnknownSchema
    from queueguard.pg.connect import connection

    with connection(empty_db) as conn:
        conn.execute("CREATE TABLE tasks (id int)")
        conn.commit()
    with pytest.raises(UnknownSchema, match="no queueguard_version"):
        upgrade(empty_db, progress=False)
    with connection(empty_db) as conn:
        assert conn.execute("SELECT to_regclass('queueguard_version')").fetchone() == (None,)


def test_a_zero_lock_timeout_is_refused(empty_db: str) -> None:
    from queueguard.errors import UsageError

    with pytest.raises(UsageError, match="at least 1ms"):
        upgrade(empty_db, lock_timeout_ms=0, progress=False)
