"""The golden fixtures shipped in the package: list them, load one, read its expectations."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from queueguard.engine import topology
from queueguard.errors import QueueguardError, UsageError
from queueguard.pg.connect import connection
from queueguard.resources import fixtures_dir
from queueguard.stores import schema


@dataclass(frozen=True)
class Fixture:
    name: str
    folder: Path

    @property
    def manifest(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads((self.folder / "manifest.json").read_text())
        return data

    @property
    def revision(self) -> str:
        return str(self.manifest["revision"])

    @property
    def database_sql(self) -> str:
        return (self.folder / "database.sql").read_text(encoding="utf-8")

    @property
    def expected_head(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads((self.folder / "expected_head.json").read_text())
        return data

    @property
    def expected_rows(self) -> dict[str, Any] | None:
        """Every column of every row after the upgrade (`upgrade.rows`); None: not frozen."""
        path = self.folder / EXPECTED_ROWS
        if not path.is_file():
            return None
        data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        return data


#: the whole rows of a fixture upgraded to head (`upgrade.rows.export_upgraded`)
EXPECTED_ROWS = "expected_rows.json"
#: the golden fixture the negative cases (`negative/*.sql`) patch
NEGATIVE_BASE = "v0.3"
NEGATIVE = "negative"


def all_fixtures(root: Path | None = None) -> list[Fixture]:
    root = root or fixtures_dir()
    return [
        Fixture(p.name, p)
        for p in sorted(root.iterdir())
        if p.is_dir() and (p / "manifest.json").exists() and (p / "database.sql").exists()
    ]


def get(name: str, root: Path | None = None) -> Fixture:
    for fixture in all_fixtures(root):
        if fixture.name == name:
            return fixture
    names = ", ".join(f.name for f in all_fixtures(root))
    raise UsageError(f"unknown fixture {name!r} (have: {names})")


#: The head schema's catalog, frozen by the fixture generator: a mutated CREATE changes a
#: fresh install and an upgraded database alike, so only a frozen catalog can see it.
HEAD_CATALOG = "head_catalog.json"


def head_catalog(root: Path | None = None) -> dict[str, Any] | None:
    """The frozen head catalog document of a fixtures folder (None when it has none)."""
    path = (root or fixtures_dir()) / HEAD_CATALOG
    if not path.is_file():
        return None
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


@dataclass(frozen=True)
class NegativeCase:
    """A broken copy of the NEGATIVE_BASE fixture: `path` patches it with one defect; the
    guard (or the runner) must refuse it with `expect` and name `names`."""

    path: Path
    expect: str
    names: str

    @property
    def name(self) -> str:
        return self.path.stem

    @property
    def sql(self) -> str:
        return self.path.read_text(encoding="utf-8")

    @property
    def guarded(self) -> bool:
        """Refused by the guard's audit checks, naming the code (the others are refused
        before any revision runs: no version table, an unknown revision)."""
        return self.expect.startswith("data.") or self.expect in (
            "schema.column_missing",
            "schema.column_type",
            "schema.key_missing",
        )

    @classmethod
    def read(cls, path: Path) -> NegativeCase:
        text = path.read_text(encoding="utf-8")
        fields = dict(re.findall(r"^-- (expect|names):\s*(.+?)\s*$", text, re.MULTILINE))
        return cls(path, fields["expect"], fields["names"])


def negative_cases(root: Path | None = None) -> list[NegativeCase]:
    """The negative cases of a fixtures folder (none when it has no `negative/`)."""
    folder = (root or fixtures_dir()) / NEGATIVE
    return [NegativeCase.read(p) for p in sorted(folder.glob("*.sql"))] if folder.is_dir() else []


def snapshot_path(name: str) -> Path:
    return fixtures_dir() / "snapshots" / name


def load(fixture: Fixture, dsn: str) -> None:
    """Load a fixture into an empty database (refuses a non-empty one), in one transaction."""
    with connection(dsn, application_name="queueguard-fixtures") as conn:
        with conn.cursor() as cursor:
            topology.refuse_standby(cursor, "load fixtures into")
        state = schema.inspect(conn)
        if not state.empty or state.tables:
            raise QueueguardError(
                f"refusing to load fixture {fixture.name}: the database is not empty "
                f"(tables: {', '.join(sorted(state.tables)) or 'none'})"
            )
        with conn.transaction():
            conn.execute(fixture.database_sql)  # no parameters: `%` in data is left alone
        conn.execute("SET search_path TO DEFAULT")
