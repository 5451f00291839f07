"""An Alembic project whose options live in pyproject.toml (`alembic init --template
pyproject`, Alembic 1.16 and later: `[tool.alembic]` holds script_location, alembic.ini keeps
the logging and the URL only) is read and upgraded as Alembic's own `upgrade` does it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest
from alembic import command
from alembic.config import Config

from queueguard import sets
from queueguard.cli import main
from queueguard.sets.alembic_config import ini_value
from queueguard.sets.alembic_dsn import sqlalchemy_url

REVISION = '''"""pets"""
from alembic import op

revision = "{rev}"
down_revision = {down}


def upgrade():
    op.execute("{sql}")
'''


def _project(root: Path) -> Path:
    """A project as `alembic init --template pyproject alembic` run in `root` leaves it, with
    two revisions."""
    cfg = Config(file_=str(root / "alembic.ini"), toml_file=str(root / "pyproject.toml"))
    command.init(cfg, str(root / "alembic"), template="pyproject")
    versions = root / "alembic" / "versions"
    versions.mkdir(exist_ok=True)
    for rev, down, sql in [
        ("p1", None, "CREATE TABLE pet (id int PRIMARY KEY)"),
        ("p2", '"p1"', "ALTER TABLE pet ADD COLUMN name text"),
    ]:
        (versions / f"{rev}.py").write_text(REVISION.format(rev=rev, down=down, sql=sql))
    return root


def test_the_options_in_pyproject_toml_are_read(tmp_path: Path) -> None:
    root = _project(tmp_path)
    assert "script_location" not in (root / "alembic.ini").read_text().split("[loggers]")[0]
    mset = sets.load(root)
    assert (mset.format, [r.id for r in mset.revisions]) == ("alembic", ["p1", "p2"])


def test_it_upgrades_as_alembic_does(
    tmp_path: Path, make_db: Callable[..., str], capsys: pytest.CaptureFixture[str]
) -> None:
    root = _project(tmp_path)
    ours, native = make_db(), make_db()
    assert main(["upgrade", "--migrations", str(root), "--dsn", ours]) == 0, capsys.readouterr()
    cfg = Config(file_=str(root / "alembic.ini"), toml_file=str(root / "pyproject.toml"))
    cfg.set_main_option("sqlalchemy.url", ini_value(sqlalchemy_url(native)))
    command.upgrade(cfg, "head")
    query = (
        "SELECT (SELECT version_num FROM alembic_version), "
        "(SELECT string_agg(column_name, ',' ORDER BY ordinal_position) "
        "FROM information_schema.columns WHERE table_name = 'pet')"
    )
    found = []
    for dsn in (ours, native):
        with psycopg.connect(dsn) as conn:
            found.append(conn.execute(query).fetchone())
    assert found[0] == found[1] == ("p2", "id,name")
