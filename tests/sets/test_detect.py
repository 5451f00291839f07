"""sets: which format a folder is, and loading it by that format or the one asked for (pure)."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest

from queueguard import revisions
from queueguard.errors import UsageError
from queueguard.resources import migrations_dir
from queueguard.sets import FORMATS, adapter, detect, load, native, sqldir, temporal

DATA = Path(__file__).parent / "data"
OURS = migrations_dir()


def test_each_format_by_its_marker(tmp_path: Path) -> None:
    assert detect(DATA / "temporal") == "temporal"
    assert detect(DATA / "alembic_plain") == "alembic"
    assert detect(OURS) == "queueguard"
    (tmp_path / "001_a.sql").write_text("CREATE TABLE a (id int);")
    assert detect(tmp_path) == "sqldir"
    # a Django project's folder may hold .sql files: its manage.py is found first
    (tmp_path / "manage.py").write_text('os.environ.setdefault("DJANGO_SETTINGS_MODULE", "x")')
    assert detect(tmp_path) == "django"


def test_a_folder_that_is_no_set_or_no_folder(tmp_path: Path) -> None:
    with pytest.raises(UsageError) as caught:
        detect(tmp_path)
    assert str(caught.value) == (
        f"{tmp_path}: not a migration set queueguard can read (an Alembic project, Temporal's "
        "vX.Y/manifest.json folders, a Django project's folder, or .sql files); say which "
        "with --format"
    )
    with pytest.raises(UsageError, match="not a directory"):
        detect(tmp_path / "missing")


def test_adapters_by_format_name() -> None:
    assert adapter("queueguard") is native
    assert adapter("temporal") is temporal
    assert adapter("sqldir") is sqldir
    assert adapter("alembic").__name__ == "queueguard.sets.alembic"
    with pytest.raises(UsageError) as caught:
        adapter("flyway")
    assert str(caught.value) == (
        "--format takes queueguard, alembic, temporal, sqldir, django, got 'flyway'"
    )
    assert FORMATS == ("queueguard", "alembic", "temporal", "sqldir", "django")


def test_load_detects_or_takes_the_format_given(tmp_path: Path) -> None:
    (tmp_path / "001_a.sql").write_text("CREATE TABLE a (id int);")
    assert load(str(tmp_path)).format == "sqldir"
    assert load(tmp_path / "x" / "..", None).root == tmp_path.resolve()
    with pytest.raises(UsageError, match="no version folders"):
        load(tmp_path, "temporal")


def test_our_own_set_needs_all_four_of_its_parts(tmp_path: Path) -> None:
    assert native.detect(OURS)
    for name in ("manifest.json", "versions", "env.py"):
        (tmp_path / name).mkdir()
    assert not native.detect(tmp_path)  # no sql/
    (tmp_path / "sql").mkdir()
    assert native.detect(tmp_path)


def test_our_own_set_as_a_format() -> None:
    mset = load(OURS)
    ours = revisions.load(OURS)
    assert mset.format == "queueguard"
    assert mset.ids == tuple(r.id for r in ours.revisions)
    assert [r.down for r in mset.revisions] == [r.down_revision for r in ours.revisions]
    assert [r.title for r in mset.revisions] == [r.title for r in ours.revisions]
    assert mset.version_table == revisions.VERSION_TABLE
    assert mset.bookkeeping == {revisions.VERSION_TABLE, "queueguard_migrations"}
    first = mset.revisions[0]
    path = OURS / "versions" / f"{first.id}.py"
    assert first.files == (path,)
    assert first.statements is None
    assert first.checksum == hashlib.sha256(path.read_bytes()).hexdigest()


def test_our_own_set_is_read_from_the_folder_given(tmp_path: Path) -> None:
    copy = tmp_path / "migrations"
    shutil.copytree(OURS, copy)
    mset = load(copy)
    assert mset.root == copy.resolve()
    assert mset.revisions[0].files == (copy.resolve() / "versions" / f"{mset.ids[0]}.py",)
    # its revisions are the folder's, not the packaged set's
    (copy / "versions" / f"{mset.ids[-1]}.py").unlink()
    assert load(copy).ids == mset.ids[:-1]


def test_a_revision_file_not_named_by_its_id_has_no_checksum(tmp_path: Path) -> None:
    copy = tmp_path / "migrations"
    shutil.copytree(OURS, copy)
    first = load(copy).ids[0]
    (copy / "versions" / f"{first}.py").rename(copy / "versions" / f"{first}_renamed.py")
    renamed = load(copy)
    assert renamed.ids[0] == first  # the id is the file's `revision`, not its name
    assert renamed.revisions[0].checksum == ""
    assert renamed.revisions[1].checksum != ""
