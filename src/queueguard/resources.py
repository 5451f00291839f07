"""Where the shipped migrations, audit queries and fixtures live (inside the package)."""

from __future__ import annotations

from importlib.resources import files
from importlib.resources.abc import Traversable
from pathlib import Path


def migrations_dir() -> Path:
    """The Alembic script directory (a real folder: Alembic needs a filesystem path)."""
    return Path(str(files("queueguard.migrations")))


def audit_dir() -> Traversable:
    return files("queueguard.audit_queries")


def fixtures_dir() -> Path:
    return Path(str(files("queueguard.fixtures")))
