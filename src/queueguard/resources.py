"""Where the shipped migrations, audit queries and fixtures live (inside the package)."""

from __future__ import annotations

import os
from importlib.resources import files
from importlib.resources.abc import Traversable
from pathlib import Path

#: Names another migration set to use wherever none is given (`--migrations`): `queueguard
#: mutate --command` sets it to each mutated copy, so a test suite that relies on the
#: defaults runs against the mutant.
MIGRATIONS_ENV = "QUEUEGUARD_MIGRATIONS"


def migrations_dir() -> Path:
    """The Alembic script directory (a real folder: Alembic needs a filesystem path): the one
    QUEUEGUARD_MIGRATIONS names, else the packaged one."""
    override = os.environ.get(MIGRATIONS_ENV)
    if override:
        return Path(override)
    return Path(str(files("queueguard.migrations")))


def audit_dir() -> Traversable:
    return files("queueguard.audit_queries")


def fixtures_dir() -> Path:
    return Path(str(files("queueguard.fixtures")))
