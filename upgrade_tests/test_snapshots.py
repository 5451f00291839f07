"""Snapshots against the SQL migration: differential restore and legacy rejection."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from queueguard import snapshot
from queueguard.cli import main
from queueguard.pg.connect import connection
from queueguard.queue_schema import state
from queueguard.queue_schema.golden import snapshot_path
from queueguard.queue_schema.runner import upgrade
from queueguard.queue_schema.verify.report import state_diff

Db = Callable[..., str]
V3_SNAPSHOTS = sorted(p.name for p in snapshot_path("").glob("v3_*.json"))
LEGACY = sorted(p.name for p in snapshot_path("").glob("legacy_*.json"))


def test_fixture_snapshots_exist() -> None:
    assert V3_SNAPSHOTS and len(LEGACY) >= 3


@pytest.mark.parametrize("name", V3_SNAPSHOTS)
def test_v3_snapshot_restores_identically_in_memory_and_sql(
    name: str, queueguard_database: Db
) -> None:
    raw = json.loads(snapshot_path(name).read_text())
    in_memory = snapshot.export_memory(snapshot.import_memory(snapshot.upgrade_document(raw)))
    dsn = queueguard_database(revision="003")
    with connection(dsn) as conn, conn.transaction():
        state.load_document(conn, raw)
    upgrade(dsn, progress=False)
    with connection(dsn) as conn:
        through_sql = state.export_database(conn)
    assert snapshot.normalise(in_memory) == snapshot.normalise(through_sql), state_diff(
        through_sql, in_memory
    )


@pytest.mark.parametrize("name", LEGACY)
def test_legacy_snapshot_is_rejected_and_nothing_imported(
    name: str, queueguard_dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["snapshot", "import", str(snapshot_path(name)), "--dsn", queueguard_dsn])
    err = capsys.readouterr().err
    assert code == 1
    assert "pre-003 export" in err and "Nothing was imported" in err
    with connection(queueguard_dsn) as conn:
        tables = conn.execute("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'")
        assert tables.fetchone() == (0,)


def test_v3_snapshot_imports_into_an_empty_database(
    queueguard_dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = snapshot_path(V3_SNAPSHOTS[0])
    assert main(["snapshot", "import", str(path), "--dsn", queueguard_dsn]) == 0
    assert "imported" in capsys.readouterr().out
    with connection(queueguard_dsn) as conn:
        exported = state.export_database(conn)
    expected = snapshot.upgrade_document(json.loads(path.read_text()))
    assert snapshot.normalise(exported) == snapshot.normalise(expected)
    # importing again refuses: the database is no longer empty, and nothing changes
    assert main(["snapshot", "import", str(path), "--dsn", queueguard_dsn]) == 1


def test_truncated_snapshot_is_rejected(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text(snapshot_path(V3_SNAPSHOTS[0]).read_text()[:500])
    assert main(["snapshot", "import", str(broken)]) == 1
    assert "not a JSON document" in capsys.readouterr().err
