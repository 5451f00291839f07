"""Bridging libpq DSNs and Alembic: an Engine from any DSN, and our Alembic Config."""

from __future__ import annotations

from typing import Any

import psycopg
import sqlalchemy as sa
from alembic.config import Config
from sqlalchemy.pool import NullPool

from queueguard.pg.connect import CONNECT_TIMEOUT_S
from queueguard.pg.dsn import validate
from queueguard.resources import migrations_dir

UPGRADE_APPLICATION_NAME = "queueguard-upgrade"


def engine_for(dsn: str, application_name: str = UPGRADE_APPLICATION_NAME) -> sa.Engine:
    """A SQLAlchemy Engine over psycopg that accepts URL and key=value DSNs alike."""
    validate(dsn)

    def creator() -> Any:
        return psycopg.connect(
            dsn, application_name=application_name, connect_timeout=CONNECT_TIMEOUT_S
        )

    return sa.create_engine("postgresql+psycopg://", creator=creator, poolclass=NullPool)


def config(**attributes: Any) -> Config:
    """An Alembic Config on the packaged script directory (no alembic.ini needed)."""
    cfg = Config()
    cfg.set_main_option("script_location", str(migrations_dir()))
    cfg.attributes.update(attributes)
    return cfg
