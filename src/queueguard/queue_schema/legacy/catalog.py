"""Statement catalogs of released hosts: `fixtures/legacy_workers/<worker>.sql` holds, as
named statements, exactly what that host version issued."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from queueguard.errors import (
    UsageError,
)
from queueguard.pg.sqlfiles import parse_named
from queueguard.resources import fixtures_dir

WORKERS = ("v0.2", "v0.3")

_HEADER_LINE = re.compile(r"^-- ([a-z_]+): (.*?)\s*$")
_REQUIRES = re.compile(r"^-- requires: (.+?)\s*$", re.MULTILINE)
PLACEHOLDER = re.compile(r"(?<![:\w]):([A-Za-z_]\w*)")


# catalogs ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Statement:
    name: str
    sql: str
    #: statements the host ran first in the same transaction (`-- requires: handshake`)
    requires: tuple[str, ...] = ()

    @property
    def placeholders(self) -> frozenset[str]:
        return frozenset(PLACEHOLDER.findall(_strip_comments(self.sql)))


@dataclass(frozen=True)
class StatementCatalog:
    worker: str  # "v0.3"
    protocol: int | None  # None: before the runtime_protocol handshake existed
    revision: str  # the schema revision this host version ran on
    statements: dict[str, Statement]

    def __getitem__(self, name: str) -> Statement:
        return self.statements[name]


def _strip_comments(sql: str) -> str:
    return "\n".join(line for line in sql.splitlines() if not line.lstrip().startswith("--"))


def catalog_dir() -> Path:
    return fixtures_dir() / "legacy_workers"


def parse_catalog(text: str) -> StatementCatalog:
    """A catalog file: `-- key: value` header lines, then `-- name:` statements."""
    header: dict[str, str] = {}
    for line in text.splitlines():
        if line.startswith("-- name:"):
            break
        match = _HEADER_LINE.match(line)
        if match:
            header[match.group(1)] = match.group(2)
    statements = {}
    for name, body in parse_named(text).items():
        requires = tuple(
            r.strip() for m in _REQUIRES.findall(body) for r in m.split(",") if r.strip()
        )
        statements[name] = Statement(name, body, requires)
    for statement in statements.values():
        for required in statement.requires:
            if required not in statements:
                raise ValueError(f"{statement.name} requires unknown statement {required!r}")
    protocol = header.get("protocol", "none")
    return StatementCatalog(
        worker=header["worker"],
        protocol=None if protocol == "none" else int(protocol),
        revision=header["revision"],
        statements=statements,
    )


def load_catalog(worker: str) -> StatementCatalog:
    if worker not in WORKERS:
        raise UsageError(f"unknown legacy worker {worker!r} (have: {', '.join(WORKERS)})")
    return parse_catalog((catalog_dir() / f"{worker}.sql").read_text(encoding="utf-8"))


def all_catalogs() -> list[StatementCatalog]:
    return [load_catalog(w) for w in WORKERS]
