"""An application's env.py whose first tables come from the application itself: it runs
`metadata.create_all()` and then `alembic upgrade` (the first revision alters a table no
revision creates). Runs on the caller's connection when given one, else its own engine."""

from alembic import context
from sqlalchemy import Connection, engine_from_config, pool

config = context.config


def _run(connection: Connection) -> None:
    context.configure(connection=connection)
    with context.begin_transaction():
        context.run_migrations()


if context.is_offline_mode():
    context.configure(url=config.get_main_option("sqlalchemy.url"), literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()
elif isinstance(config.attributes.get("connection"), Connection):
    _run(config.attributes["connection"])
else:
    engine = engine_from_config(
        config.get_section(config.config_ini_section, {}),
        prefix="sqlalchemy.",
        poolclass=pool.NullPool,
    )
    with engine.connect() as connection:
        _run(connection)
