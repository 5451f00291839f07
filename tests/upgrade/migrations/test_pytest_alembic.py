"""pytest-alembic's built-in tests, called through `alembic_runner` (see pyproject.toml)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa
from pytest_alembic.runner import MigrationContext
from pytest_alembic.tests import default as alembic_builtin

from queueguard.errors import IrreversibleMigration
from queueguard.queue_schema.alembic_config import config as alembic_config_for
from queueguard.queue_schema.alembic_config import engine_for

from .support import ALL


@pytest.fixture
def alembic_config() -> Any:
    return alembic_config_for(progress=False)


@pytest.fixture
def alembic_engine(empty_db: str) -> Iterator[sa.Engine]:
    engine = engine_for(empty_db)
    yield engine
    engine.dispose()


def test_pytest_alembic_single_head_revision(alembic_runner: MigrationContext) -> None:
    alembic_builtin.test_single_head_revision(alembic_runner)


def test_pytest_alembic_upgrade(alembic_runner: MigrationContext) -> None:
    alembic_builtin.test_upgrade(alembic_runner)


def test_pytest_alembic_upgrade_through_every_revision(
    alembic_runner: MigrationContext, alembic_engine: sa.Engine
) -> None:
    # Built-in test_up_down_consistency would also downgrade: every revision refuses to
    # (004 renumbers task ids, and a released schema is never torn down), so only its
    # upgrade half applies. test_model_definitions_match_ddl needs SQLAlchemy models; the
    # schema lives in raw SQL and is compared by catalog in test_schemas.py instead.
    seen = []
    for rev in alembic_runner.history.revisions:
        if rev in ("base", "heads"):
            continue
        alembic_runner.migrate_up_to(rev, return_current=False)
        with alembic_engine.connect() as conn:
            seen.append(conn.exec_driver_sql("SELECT version_num FROM queueguard_version").scalar())
    assert seen == ALL


def test_pytest_alembic_downgrade_refuses(alembic_runner: MigrationContext) -> None:
    alembic_runner.migrate_up_to("heads", return_current=False)
    with pytest.raises(IrreversibleMigration):
        alembic_runner.migrate_down_one()
