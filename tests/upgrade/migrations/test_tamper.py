"""Tamper detection: the manifest names every change to a released revision."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from queueguard.errors import TamperedMigration
from queueguard.queue_schema import manifest
from queueguard.resources import migrations_dir

from .support import ALL


@pytest.fixture
def migrations_copy(tmp_path: Path) -> Path:
    root = tmp_path / "migrations"
    shutil.copytree(migrations_dir(), root, ignore=shutil.ignore_patterns("__pycache__"))
    return root


def test_the_shipped_migrations_verify_clean(migrations_copy: Path) -> None:
    assert manifest.verify() == []
    assert manifest.verify(migrations_copy) == []
    recorded = {e["revision"]: e["sha256"] for e in manifest.load()}
    assert recorded == {r: manifest.revision_sha256(r) for r in ALL}


def _edit(root: Path) -> str:
    path = root / "sql/002/01_user_data.sql"
    path.write_text(path.read_text() + "-- harmless?\n")
    return "sql/002/01_user_data.sql (edited)"


def _remove_file(root: Path) -> str:
    (root / "sql/004/05_fence.sql").unlink()
    return "sql/004/05_fence.sql (removed)"


def _add_file(root: Path) -> str:
    (root / "sql/001/02_extra.sql").write_text("SELECT 1;\n")
    return "sql/001/02_extra.sql (added)"


def _reorder_files(root: Path) -> str:
    (root / "sql/003/00_locks.sql").rename(root / "sql/003/02_locks.sql")
    return "sql/003/00_locks.sql (removed), sql/003/02_locks.sql (added)"


def _remove_revision(root: Path) -> str:
    shutil.rmtree(root / "sql/003")
    return "released revision 003 was removed (migrations/sql/003/)"


def _swap_revisions(root: Path) -> str:
    a, b, tmp = root / "sql/001", root / "sql/002", root / "sql/tmp"
    a.rename(tmp)
    b.rename(a)
    tmp.rename(b)
    return "sql/001/01_spool.sql (removed), sql/001/01_user_data.sql (added)"


def _reorder_manifest(root: Path) -> str:
    path = root / "manifest.json"
    data = json.loads(path.read_text())
    data["revisions"][1], data["revisions"][2] = data["revisions"][2], data["revisions"][1]
    path.write_text(json.dumps(data))
    return "released revisions are out of order: ['001', '003', '002', '004']"


@pytest.mark.parametrize(
    "tamper",
    [
        _edit,
        _remove_file,
        _add_file,
        _reorder_files,
        _remove_revision,
        _swap_revisions,
        _reorder_manifest,
    ],
)
def test_tampering_with_a_released_revision_is_named(
    migrations_copy: Path, tamper: Callable[[Path], str]
) -> None:
    expected = tamper(migrations_copy)
    problems = manifest.verify(migrations_copy)
    assert any(expected in p for p in problems), problems
    with pytest.raises(TamperedMigration):
        manifest.require_intact(migrations_copy)
