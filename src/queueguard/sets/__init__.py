"""Migration sets in any format: queueguard's own, Temporal's versioned schema directories,
Alembic projects and plain SQL directories.

`load(DIR)` detects the format (or takes `--format`) and returns the one model the runner
and the tracer read (`sets.model.MigrationSet`); each format is a small adapter module with
`detect`, `load` and `current` (the revision a database is at, read only).
"""

from __future__ import annotations

import importlib
from pathlib import Path
from types import ModuleType

from queueguard.errors import UsageError
from queueguard.sets.model import FORMATS, MigrationSet, Revision

__all__ = ["FORMATS", "MigrationSet", "Revision", "adapter", "detect", "load"]

#: the order formats are tried in: the most specific marker first (our own set is an Alembic
#: project with a manifest.json; a Temporal folder holds vX.Y/manifest.json; .sql files last)
_DETECTION = ("queueguard", "temporal", "alembic", "django", "sqldir")
_MODULES = {
    "queueguard": "native",
    "temporal": "temporal",
    "alembic": "alembic",
    "sqldir": "sqldir",
    "django": "django",
}
#: where a format's `detect` lives when its adapter is costly to import
_DETECTORS = {"alembic": "alembic_detect", "django": "django_start"}


def adapter(format_name: str) -> ModuleType:
    if format_name not in _MODULES:
        raise UsageError(f"--format takes {', '.join(FORMATS)}, got {format_name!r}")
    return importlib.import_module(f"queueguard.sets.{_MODULES[format_name]}")


def detect(root: Path) -> str:
    """The format of the migration set at `root`."""
    if not root.is_dir():
        raise UsageError(f"{root}: not a directory")
    for name in _DETECTION:
        module = importlib.import_module(f"queueguard.sets.{_DETECTORS.get(name, _MODULES[name])}")
        if module.detect(root):
            return name
    raise UsageError(
        f"{root}: not a migration set queueguard can read (an Alembic project, Temporal's "
        "vX.Y/manifest.json folders, a Django project's folder, or .sql files); say which "
        "with --format"
    )


def load(root: Path | str, format_name: str | None = None, dsn: str | None = None) -> MigrationSet:
    """The set in `root`. `dsn`: a database the command was given, which an Alembic project
    whose env.py cannot run offline (Dagster's needs the caller's connection in both modes)
    is asked its version table on, read only (`alembic_version_table.version_table`)."""
    root = Path(root).resolve()
    name = format_name or detect(root)
    if name == "alembic":
        from queueguard.sets import alembic

        return alembic.load(root, dsn)
    if name == "django":  # its runner connects to the command's target (`django.Graph`)
        from queueguard.sets import django

        return django.load(root, dsn=dsn)
    return adapter(name).load(root)  # type: ignore[no-any-return]
