"""Django 6.x, which needs Python 3.12 or later, in a project interpreter of its own
(`--python`): queueguard itself runs on 3.11 and never imports Django, so the project's
Django is whatever its interpreter has. Skipped, with the reason, where no Python 3.12+ is
found; where one is, Django 6 is installed from PyPI into a fresh virtual environment."""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from queueguard.cli import main

pytestmark = pytest.mark.slow


def _python_312() -> str | None:
    """A Python 3.12+ on this machine: on PATH, or one of pyenv's."""
    candidates = [shutil.which(name) for name in ("python3.13", "python3.12")]
    candidates += sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.1[2-9]*/bin/python3")))
    for path in filter(None, candidates):
        done = subprocess.run(
            [path, "-c", "import sys; print(sys.version_info >= (3, 12))"],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        if done.returncode == 0 and done.stdout.strip() == "True":
            return path
    return None


@pytest.fixture(scope="module")
def django6(tmp_path_factory: pytest.TempPathFactory) -> str:
    python = _python_312()
    if python is None:
        pytest.skip("no Python 3.12 or later on this machine: Django 6 cannot be installed")
    venv = tmp_path_factory.mktemp("django6") / "venv"
    subprocess.run([python, "-m", "venv", str(venv)], check=True)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q"]
    subprocess.run([*pip, "django>=6,<7", "psycopg[binary]"], check=True, timeout=300)
    return str(venv / "bin" / "python")


def test_a_django_6_project_in_its_own_interpreter(
    django6: str, shop: Path, empty_db: str, pg_admin_dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    version = subprocess.run(
        [django6, "-c", "import django; print(django.VERSION[0])"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    assert version == "6"
    given = ["--migrations", str(shop), "--python", django6, "--json"]
    assert main(["upgrade", *given, "--dsn", empty_db]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["latestApplied"]["orders"] == "0001_squashed_0003_order_status"
    assert main(["verify", *given, "--dsn", pg_admin_dsn]) == 0
    checks = json.loads(capsys.readouterr().out)["checks"]
    assert {c["name"] for c in checks} >= {"chain", "rerun", "bookkeeping"}
    assert all(c["ok"] for c in checks)
