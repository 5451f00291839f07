"""queueguard's own migration set as a format: an Alembic project with a `manifest.json`
and `sql/` step files beside `versions/`. Its revisions are Python, run by Alembic through
the same adapter as any Alembic project (`sets.alembic`), with its own version table."""

from __future__ import annotations

import hashlib
from pathlib import Path

from queueguard import revisions
from queueguard.sets.model import MigrationSet, Revision


def detect(root: Path) -> bool:
    return all((root / name).exists() for name in ("manifest.json", "versions", "env.py", "sql"))


def load(root: Path) -> MigrationSet:
    mset = revisions.load(root)
    found = []
    for rev in mset.revisions:
        path = root / "versions" / f"{rev.id}.py"
        found.append(
            Revision(
                id=rev.id,
                down=rev.down_revision,
                title=rev.title,
                files=(path,),
                checksum=hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else "",
                statements=None,
            )
        )
    bookkeeping = frozenset({revisions.VERSION_TABLE, "queueguard_migrations"})
    return MigrationSet(
        "queueguard", root, tuple(found), bookkeeping, version_table=revisions.VERSION_TABLE
    )
