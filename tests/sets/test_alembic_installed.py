"""An Alembic project as applications ship it: a package installed into a venv by pip, its
alembic.ini inside the script folder with a script_location relative to site-packages (the
application sets the real one in code), its env.py importing the application. The folder
holding env.py and versions/ is the script location, whatever script_location says; the
ini's other options still count, and the folder works without any ini too."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import sysconfig
from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest

from queueguard import sets
from queueguard.cli import main

PACKAGE = Path(__file__).parent / "data" / "alembic_pkg"


def _site_packages(venv: Path) -> Path:
    relative = Path(sysconfig.get_path("purelib")).relative_to(sysconfig.get_path("data"))
    return venv / relative


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_an_installed_package_with_its_ini_inside_the_script_folder(
    tmp_path: Path,
    make_db: Callable[..., str],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    pip = [sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps"]
    subprocess.run([*pip, str(PACKAGE)], check=True, capture_output=True)
    site = _site_packages(venv)
    folder = site / "qgpkg_store" / "store" / "db_migrations"
    assert (folder / "alembic.ini").is_file() and (folder / "env.py").is_file()
    # the application is importable where queueguard runs, as in the user's environment
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.chdir(tmp_path)  # neither the ini's folder nor the cwd resolves its location

    mset = sets.load(folder)
    assert (mset.format, mset.ids) == ("alembic", ("p1", "p2"))
    assert mset.bookkeeping == frozenset({"qgpkg_version"})  # the ini's own option, read by env.py

    dsn = make_db()
    assert main(["upgrade", "--migrations", str(folder), "--dsn", dsn, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert (doc["before"], doc["after"], doc["applied"]) == (None, "p2", ["p1", "p2"])
    assert main(["status", "--migrations", str(folder), "--dsn", dsn, "--json"]) == 0
    status = json.loads(capsys.readouterr().out)
    assert (status["revision"], status["pending"]) == ("p2", [])
    with psycopg.connect(dsn) as conn:
        assert conn.execute("SELECT version_num FROM qgpkg_version").fetchall() == [("p2",)]

    # the same folder without any ini: env.py's defaults (alembic_version)
    bare = tmp_path / "bare"
    shutil.copytree(folder, bare)
    (bare / "alembic.ini").unlink()
    assert sets.load(bare).bookkeeping == frozenset({"alembic_version"})
    other = make_db()
    assert main(["upgrade", "--migrations", str(bare), "--dsn", other, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["after"] == "p2"
