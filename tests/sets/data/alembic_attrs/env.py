"""An env.py that runs on the caller's connection (Alembic's cookbook recipe "Sharing a
Connection across one or more programmatic migration commands") and keeps its versions in
its own table, `schema_rev`."""

from alembic import context
from sqlalchemy.engine import Connection

VERSION_TABLE = "schema_rev"
config = context.config


def run_migrations_offline() -> None:
    context.configure(
        url=config.get_main_option("sqlalchemy.url"),
        literal_binds=True,
        version_table=VERSION_TABLE,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if not isinstance(connection, Connection):
        raise RuntimeError("this project runs on config.attributes['connection'] only")
    context.configure(
        connection=connection, version_table=VERSION_TABLE, transaction_per_migration=True
    )
    with context.begin_transaction():
        context.run_migrations()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
