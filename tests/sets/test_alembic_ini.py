"""An Alembic ini read exactly as Alembic reads it (`path_separator`, its legacy default,
`version_locations`, `prepend_sys_path`, `%(here)s`, several version folders), a set that
reads as empty refused naming where Alembic looked, and a database whose version rows name
revisions the set does not hold refused in every command and in `fleet`."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest
from alembic import command
from alembic.script import ScriptDirectory

from queueguard.cli import main
from queueguard.errors import UsageError
from queueguard.sets import alembic as fmt
from queueguard.sets.alembic_config import config
from tests.sets import two_bases

EVERY = 15  # revisions of the two-base project


@pytest.mark.parametrize("separator", [*two_bases.SEPARATORS, None])
def test_every_path_separator_alembic_documents_reads_both_version_folders(
    tmp_path: Path, separator: str | None
) -> None:
    """`space`, `newline`, `os`, `:`, `;` and none at all (Alembic's legacy splitting on
    spaces and commas), with `prepend_sys_path = .` beside them: both folders read, env.py
    imports the project's module (the version table is learnt by running it)."""
    root = two_bases.write(tmp_path / "p", separator)
    mset = fmt.load(root)
    assert len(mset.ids) == EVERY and mset.heads == ("a02", "m10")
    # what Alembic itself reads from the same ini, run from the project's folder
    alone = ScriptDirectory.from_config(config(root, None))
    assert {s.revision for s in alone.walk_revisions()} == set(mset.ids)


def test_relative_entries_are_taken_from_the_ini_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`versions_x` relative, as `alembic` run from the project's folder reads it; queueguard
    run from anywhere reads the same."""
    root = two_bases.write(
        tmp_path / "p", ";", locations=["alembic/versions_main", "alembic/versions_aux"]
    )
    monkeypatch.chdir(tmp_path)
    assert len(fmt.load(root).ids) == EVERY


def test_a_path_separator_alembic_refuses_is_refused_with_its_reason(tmp_path: Path) -> None:
    root = two_bases.write(tmp_path / "p", ";")
    ini = root / "alembic.ini"
    ini.write_text(ini.read_text().replace("path_separator = ;", "path_separator = |"))
    with pytest.raises(UsageError, match=r"'\|' is not a valid value for path_separator"):
        fmt.load(root)


def test_a_set_that_reads_as_empty_is_refused_naming_where_alembic_looked(
    tmp_path: Path, empty_db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Folders joined by `;` under `path_separator = :` are one folder that does not exist:
    Alembic finds nothing, and every command says so (exit 2), never "nothing to do"."""
    root = two_bases.write(tmp_path / "p", ";")
    ini = root / "alembic.ini"
    ini.write_text(ini.read_text().replace("path_separator = ;", "path_separator = :"))
    with pytest.raises(UsageError, match="Alembic finds no revisions; it looked in") as caught:
        fmt.load(root)
    assert "versions_main;" in str(caught.value) and "(no such folder)" in str(caught.value)
    for argv in (["status"], ["upgrade"], ["plan"]):
        code = main([*argv, "--migrations", str(root), "--dsn", empty_db, "--json"])
        out, err = capsys.readouterr()
        assert code == 2 and "Alembic finds no revisions" in err and str(root) in err
        assert "nothing to do" not in out + err


def _rows(dsn: str, *versions: str) -> None:
    with psycopg.connect(dsn) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS alembic_version (version_num varchar(32))")
        for v in versions:
            conn.execute("INSERT INTO alembic_version VALUES (%s)", (v,))


def test_version_rows_the_set_does_not_hold_are_refused_in_every_command(
    tmp_path: Path, make_db: Callable[..., str], capsys: pytest.CaptureFixture[str]
) -> None:
    root = two_bases.write(tmp_path / "p", ";")
    dsn = make_db()
    command.upgrade(config(root, dsn), "m03a")
    command.upgrade(config(root, dsn), "aux@+1")
    _rows(dsn, "deadbeef0000")
    for argv in (["status"], ["plan"], ["upgrade"], ["upgrade", "--to", "main@+1"]):
        code = main([*argv, "--migrations", str(root), "--dsn", dsn, "--json"])
        out, err = capsys.readouterr()
        assert code == 2, (argv, out, err)
        assert "version rows name deadbeef0000, which" in err
    with psycopg.connect(dsn) as conn:  # nothing applied
        rows = conn.execute("SELECT version_num FROM alembic_version ORDER BY 1").fetchall()
    assert [r[0] for r in rows] == ["a01", "deadbeef0000", "m03a"]
