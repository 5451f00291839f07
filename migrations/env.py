"""Alembic environment for queueguard.

Follows Alembic's recipe for sharing a connection: `config.attributes["connection"]` may hold
an Engine or a Connection (pytest-alembic and queueguard's runner pass one); otherwise the
URL comes from `-x dsn=...`, `QUEUEGUARD_DSN` or `sqlalchemy.url`. One transaction per
revision, version table `queueguard_version`.
"""

from __future__ import annotations

import os

from alembic import context
from sqlalchemy import engine_from_config
from sqlalchemy.engine import Connection, Engine

from queueguard.revisions import VERSION_TABLE
from queueguard.upgrade.alembic_config import engine_for

config = context.config


def _configure(connection: Connection) -> None:
    context.configure(
        connection=connection,
        version_table=VERSION_TABLE,
        transaction_per_migration=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_offline() -> None:
    context.configure(
        url="postgresql+psycopg://",
        literal_binds=True,
        dialect_opts={"paramstyle": "named"},
        version_table=VERSION_TABLE,
        transaction_per_migration=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_online() -> None:
    connectable = config.attributes.get("connection")
    if isinstance(connectable, Connection):
        _configure(connectable)
        return
    if connectable is None:
        dsn = context.get_x_argument(as_dictionary=True).get("dsn") or os.environ.get(
            "QUEUEGUARD_DSN"
        )
        if dsn:
            connectable = engine_for(dsn)
        else:
            connectable = engine_from_config(
                config.get_section(config.config_ini_section, {}), prefix="sqlalchemy."
            )
    assert isinstance(connectable, Engine)
    with connectable.connect() as connection:
        _configure(connection)


if context.is_offline_mode():
    run_offline()
else:
    run_online()
