"""Plain SQL directories: one revision per `.sql` file, ordered by the version in its name.

Accepted names (the conventions of the tools that write such folders):
- numeric or timestamp prefixes: `001_create.sql`, `20240105120000_add_index.sql`;
- Flyway versioned files: `V1__init.sql`, `V1.1__more.sql`, `V2_1__x.sql` (`_` in a version
  is a dot); repeatable (`R__`) and undo (`U1__`) files are refused: they are not a line;
- golang-migrate: `000001_init.up.sql`, with `.down.sql` files ignored;
- goose and dbmate files (`00001_init.sql`, `20240105120000_init.sql`), which hold both
  directions: read by their markers, the up section only (`sql_markers`).
A revision's id is its version as written (`001`, `1.1`, `20240105120000`); versions compare
as numbers, part by part, so `2` comes before `10`.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any

import psycopg

from queueguard.errors import UsageError
from queueguard.pg.sqlfiles import queries
from queueguard.sets import sql_markers
from queueguard.sets.model import MigrationSet, Revision

Q = queries("queueguard.sets", "sqldir.sql")
#: our ledger: which files were applied, with their checksum (tamper detection)
LEDGER = "queueguard_sqldir_ledger"
_FLYWAY = re.compile(r"^V(?P<version>\d+(?:[._]\d+)*)__(?P<name>.*)$")
_PREFIXED = re.compile(r"^(?P<version>\d+)(?:[_-](?P<name>.*))?$")


def _version_of(path: Path) -> tuple[str, str] | None:
    """(version, title) for a file name; None for a file that is not a forward migration."""
    name = path.name
    if name.endswith(".down.sql"):
        return None
    stem = name.removesuffix(".up.sql") if name.endswith(".up.sql") else path.stem
    if re.match(r"^(R|U\d)", stem) and "__" in stem:
        raise UsageError(
            f"{path}: Flyway repeatable and undo migrations are not supported "
            "(only versioned V<n>__name.sql files form a line)"
        )
    found = _FLYWAY.match(stem) or _PREFIXED.match(stem)
    if found is None:
        raise UsageError(
            f"{path}: no version in the file name (expected e.g. 001_name.sql, "
            "V1__name.sql or 000001_name.up.sql)"
        )
    version = found["version"].replace("_", ".")
    title = (found["name"] or "").replace("_", " ").strip()
    return version, title


def order(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


def detect(root: Path) -> bool:
    return any(p.is_file() for p in root.glob("*.sql"))


def load(root: Path) -> MigrationSet:
    found: dict[tuple[int, ...], tuple[str, str, Path]] = {}
    for path in sorted(p for p in root.glob("*.sql") if p.is_file()):
        parsed = _version_of(path)
        if parsed is None:
            continue
        version, title = parsed
        key = order(version)
        if key in found:
            raise UsageError(f"{root}: version {version} twice ({found[key][2].name}, {path.name})")
        found[key] = (version, title, path)
    if not found:
        raise UsageError(f"{root}: no .sql migration files")
    revisions: list[Revision] = []
    down: str | None = None
    for key in sorted(found):
        version, title, path = found[key]
        raw = path.read_bytes()
        # goose and dbmate files hold both directions: their up section only
        read = sql_markers.read(raw.decode("utf-8"), str(path))
        revisions.append(
            Revision(
                id=version,
                down=down,
                title=title or path.name,
                files=(path,),
                checksum=hashlib.sha256(raw).hexdigest(),
                statements=tuple(read.statements),
                native=read.native,
            )
        )
        down = version
    return MigrationSet("sqldir", root, tuple(revisions), frozenset({LEDGER}), order=order)


def applied(conn: psycopg.Connection[Any]) -> dict[str, str]:
    """{revision: checksum} of the files the ledger records (empty: no ledger); read only."""
    row = conn.execute(Q["ledger_exists"]).fetchone()
    if not row or not row[0]:
        return {}
    return {r[0]: r[1] for r in conn.execute(Q["applied"]).fetchall()}


def current(conn: psycopg.Connection[Any]) -> str | None:
    """The latest revision the ledger records (None: nothing applied)."""
    done = applied(conn)
    return max(done, key=order) if done else None


def ensure_ledger(conn: psycopg.Connection[Any]) -> None:
    conn.execute(Q["create_ledger"])


def record(conn: psycopg.Connection[Any], revision: Revision) -> None:
    """The ledger row of one applied file (the caller's transaction)."""
    conn.execute(Q["record"], {"revision": revision.id, "checksum": revision.checksum})


def tampered(conn: psycopg.Connection[Any], mset: MigrationSet) -> list[str]:
    """Applied files whose bytes changed since, or that the folder no longer has."""
    found = []
    known = {r.id: r for r in mset.revisions}
    for revision, checksum in sorted(applied(conn).items(), key=lambda kv: order(kv[0])):
        if revision not in known:
            found.append(f"{revision}: applied, but {mset.root} no longer has it")
        elif known[revision].checksum != checksum:
            found.append(f"{known[revision].files[0].name}: changed since it was applied")
    return found
