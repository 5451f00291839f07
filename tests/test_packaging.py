"""What `pip install queueguard` gets: the wheel built from this checkout holds every file of
the package's source. The package list in pyproject.toml is written by hand; a folder left
out of it is missing from the wheel only, so an editable install (every test here) never
notices — a Django project's runner folder and the fleet package were once missing so."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src" / "queueguard"


def test_the_wheel_holds_every_file_of_the_package(tmp_path: Path) -> None:
    # built from a copy, as from a fresh clone: setuptools reuses a build/ folder it finds,
    # and an editable install's egg-info lists every file (which then ships, listed or not)
    tree = tmp_path / "tree"
    tree.mkdir()
    for name in ("pyproject.toml", "README.md", "src", "migrations", "audit_queries", "fixtures"):
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(
                source, tree / name, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info")
            )
        else:
            shutil.copy2(source, tree / name)
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(tmp_path),
         str(tree)],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert built.returncode == 0, built.stderr[-2000:]
    (wheel,) = tmp_path.glob("queueguard-*.whl")
    shipped = set(zipfile.ZipFile(wheel).namelist())
    source = {
        "queueguard/" + path.relative_to(SRC).as_posix()
        for path in SRC.rglob("*")
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc"
    }
    assert sorted(source - shipped) == []
    # the top-level folders shipped as sub-packages
    assert "queueguard/migrations/env.py" in shipped
    assert any(n.startswith("queueguard/audit_queries/") for n in shipped)
    assert any(n.startswith("queueguard/fixtures/") for n in shipped)
