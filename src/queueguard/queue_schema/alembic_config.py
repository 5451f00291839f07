"""Bridging libpq DSNs and Alembic: an Engine from any DSN (the engine's, which env.py
imports from here), and our Alembic Config."""

from __future__ import annotations

from typing import Any

from alembic.config import Config

from queueguard.engine.formats.alembic.per_revision import engine_for, script_config
from queueguard.resources import migrations_dir
from queueguard.revisions import SetFacts

__all__ = ["config", "engine_for"]


def config(migrations: SetFacts | None = None, **attributes: Any) -> Config:
    """An Alembic Config on a migration set's script directory (default: the packaged one;
    no alembic.ini needed)."""
    root = migrations.root if migrations is not None else migrations_dir()
    return script_config(root, **attributes)
