"""Bridging libpq DSNs and Alembic: an Engine from any DSN, and our Alembic Config."""

from __future__ import annotations

import io
from typing import Any

import psycopg
import sqlalchemy as sa
from alembic.config import Config
from sqlalchemy.pool import NullPool

from queueguard.pg.connect import CONNECT_TIMEOUT_S
from queueguard.pg.dsn import validate
from queueguard.resources import migrations_dir
from queueguard.revisions import SetFacts
from queueguard.sets.alembic_hooks import own_engine

UPGRADE_APPLICATION_NAME = "queueguard-upgrade"


def engine_for(dsn: str, application_name: str = UPGRADE_APPLICATION_NAME) -> sa.Engine:
    """A SQLAlchemy Engine over psycopg that accepts URL and key=value DSNs alike."""
    validate(dsn)

    def creator() -> Any:
        # No server-side prepared statements: through a transaction pooler the next
        # transaction may run on another server connection, where they do not exist.
        return psycopg.connect(
            dsn,
            application_name=application_name,
            connect_timeout=CONNECT_TIMEOUT_S,
            prepare_threshold=None,
        )

    engine = sa.create_engine("postgresql+psycopg://", creator=creator, poolclass=NullPool)
    return own_engine(engine)


def config(migrations: SetFacts | None = None, **attributes: Any) -> Config:
    """An Alembic Config on a migration set's script directory (default: the packaged one;
    no alembic.ini needed)."""
    # Alembic's own messages go to a buffer, not sys.stdout (swapping sys.stdout is not
    # thread-safe, and hosts may install the schema from several threads at once).
    cfg = Config(stdout=io.StringIO())
    root = migrations.root if migrations is not None else migrations_dir()
    cfg.set_main_option("script_location", str(root))
    cfg.attributes.update(attributes)
    return cfg
