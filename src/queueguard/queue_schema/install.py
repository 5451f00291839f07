"""The installer the runtime uses on an empty database: the head schema, created by running
every revision (the same path `queueguard upgrade` takes, so a fresh install and an upgraded
database cannot differ)."""

from __future__ import annotations


def create_head_schema(dsn: str) -> None:
    # Imported on first use: the runner pulls in Alembic, which a store that never meets an
    # empty database does not need.
    from queueguard.queue_schema.runner import upgrade

    upgrade(dsn, progress=False)
