"""A copy of the test shop project (tests/django_projects/shop) per test, and its own
`manage.py` run on a database, to compare with what queueguard did."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from queueguard.pg import dsn as dsns

SHOP = Path(__file__).resolve().parent.parent / "django_projects" / "shop"


@pytest.fixture
def shop(tmp_path: Path) -> Path:
    """The shop project, copied: a test may add migrations or change settings."""
    root = tmp_path / "shop"
    shutil.copytree(SHOP, root, ignore=shutil.ignore_patterns("__pycache__"))
    return root


def manage(root: Path, dsn: str, *args: str) -> str:
    """`python manage.py ARGS` in the project, its settings pointed at `dsn` through the
    environment it reads."""
    params = dsns.params(dsn)
    env = {
        "SHOP_DB_NAME": params["dbname"],
        "SHOP_DB_HOST": params.get("host", "localhost"),
        "SHOP_DB_PORT": params.get("port", "5432"),
        "SHOP_DB_USER": params.get("user", "postgres"),
        "PATH": "/usr/bin:/bin",
    }
    done = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def add_migration(root: Path, app: str, name: str, body: str) -> None:
    (root / app / "migrations" / f"{name}.py").write_text(body)
