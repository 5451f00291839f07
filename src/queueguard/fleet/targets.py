"""The targets file: which databases and schemas make the fleet, and the waves they go in.

Pure: the file is read and checked here (`parse`), the `[[discover]]` entries are resolved
on their servers by `fleet.discover`. Every refusal is one line naming the key, raised
before anything is claimed or written (exit 2)."""

from __future__ import annotations

import hashlib
import os
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from psycopg import conninfo

from queueguard.errors import FleetFileError
from queueguard.pg.dsn import redact

ON_ERROR = ("stop", "isolate")
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")

_TOP = {"migrations", "format", "targets", "discover", "waves"}
_TARGET = {"name", "dsn", "schema", "labels"}
_DISCOVER = {"dsn", "databases", "schemas", "query", "labels"}
_WAVE = {"name", "match", "parallel", "on_error", "max_failures"}


@dataclass(frozen=True)
class Target:
    """One member of the fleet: a database, or a schema in one (`schema`)."""

    name: str
    #: the DSN as this runner connects (credentials expanded: never printed or stored)
    dsn: str
    schema: str | None = None
    labels: dict[str, str] = field(default_factory=dict, hash=False, compare=False)

    @property
    def database(self) -> str:
        return str(conninfo.conninfo_to_dict(self.dsn).get("dbname") or "")

    @property
    def server(self) -> str:
        """host:port, the unit the per-server connection cap counts by."""
        params = conninfo.conninfo_to_dict(self.dsn)
        return f"{params.get('host') or 'localhost'}:{params.get('port') or '5432'}"

    @property
    def redacted(self) -> str:
        return redact(self.dsn)


@dataclass(frozen=True)
class Discover:
    dsn: str
    #: exactly one of: a LIKE over pg_database.datname, a LIKE over the schemas, a query
    databases: str | None
    schemas: str | None
    query: str | None
    labels: dict[str, str]
    key: str  # e.g. discover[1], for messages


@dataclass(frozen=True)
class Wave:
    name: str
    match: dict[str, str]
    parallel: int
    on_error: str
    max_failures: int | None


@dataclass(frozen=True)
class FleetFile:
    path: Path
    #: sha256 of the file's text (no secret: a password comes from ${VAR} or elsewhere)
    digest: str
    migrations: Path | None
    format: str | None
    targets: tuple[Target, ...]
    discover: tuple[Discover, ...]
    waves: tuple[Wave, ...]


def load(path: Path, parallel: int = 4, environ: dict[str, str] | None = None) -> FleetFile:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise FleetFileError(f"{path}: cannot read the targets file: {exc.strerror}") from None
    return parse(text, path, parallel, dict(os.environ) if environ is None else environ)


def parse(text: str, path: Path, parallel: int, environ: dict[str, str]) -> FleetFile:
    """The targets file checked whole: every refusal names the file and its key."""
    try:
        return _parse(text, path, parallel, environ)
    except FleetFileError as exc:
        raise FleetFileError(f"{path}: {exc}") from None


def _parse(text: str, path: Path, parallel: int, environ: dict[str, str]) -> FleetFile:
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise FleetFileError(f"not TOML: {exc}") from None
    _keys(doc, _TOP, "")
    migrations = doc.get("migrations")
    if migrations is not None and not isinstance(migrations, str):
        raise FleetFileError("migrations: a path (a string) expected")
    fmt = doc.get("format")
    if fmt is not None and not isinstance(fmt, str):
        raise FleetFileError("format: a string expected")
    targets = tuple(
        _target(t, f"targets[{i}]", environ) for i, t in enumerate(_tables(doc, "targets"))
    )
    discover = tuple(
        _discover(d, f"discover[{i}]", environ) for i, d in enumerate(_tables(doc, "discover"))
    )
    if not targets and not discover:
        raise FleetFileError("neither [[targets]] nor [[discover]]: no fleet")
    waves = tuple(_wave(w, f"waves[{i}]", parallel) for i, w in enumerate(_tables(doc, "waves")))
    if not waves:
        waves = (Wave("all", {}, parallel, "stop", None),)
    unique([w.name for w in waves], "waves")
    unique([t.name for t in targets], "targets")
    return FleetFile(
        path=path,
        digest=hashlib.sha256(text.encode()).hexdigest(),
        migrations=(path.parent / migrations).resolve() if migrations else None,
        format=fmt,
        targets=targets,
        discover=discover,
        waves=waves,
    )


def _tables(doc: dict[str, Any], key: str) -> list[dict[str, Any]]:
    found = doc.get(key, [])
    if not isinstance(found, list) or not all(isinstance(t, dict) for t in found):
        raise FleetFileError(f"{key}: an array of tables expected ([[{key}]])")
    return found


def _keys(table: dict[str, Any], allowed: set[str], where: str) -> None:
    for key in table:
        if key not in allowed:
            name = f"{where}.{key}" if where else key
            raise FleetFileError(f"{name}: unknown key (known: {', '.join(sorted(allowed))})")


def _string(table: dict[str, Any], key: str, where: str, *, required: bool = False) -> str | None:
    value = table.get(key)
    if value is None:
        if required:
            raise FleetFileError(f"{where}.{key}: missing")
        return None
    if not isinstance(value, str) or not value:
        raise FleetFileError(f"{where}.{key}: a non-empty string expected")
    return value


def _labels(table: dict[str, Any], key: str, where: str) -> dict[str, str]:
    value = table.get(key, {})
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise FleetFileError(f"{where}.{key}: a table of strings expected")
    return dict(value)


def expand(dsn: str, where: str, environ: dict[str, str]) -> str:
    """`${VAR}` from the runner's environment (a password never written in the file)."""

    def value(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in environ:
            raise FleetFileError(f"{where}.dsn: ${{{name}}} is not set in the environment")
        return environ[name]

    return _VAR.sub(value, dsn)


def _dsn(table: dict[str, Any], where: str, environ: dict[str, str]) -> str:
    raw = _string(table, "dsn", where, required=True)
    assert raw is not None
    dsn = expand(raw, where, environ)
    try:
        conninfo.conninfo_to_dict(dsn)
    except Exception:
        raise FleetFileError(f"{where}.dsn: not a connection string libpq can parse") from None
    return dsn


def _target(table: dict[str, Any], where: str, environ: dict[str, str]) -> Target:
    _keys(table, _TARGET, where)
    dsn = _dsn(table, where, environ)
    schema = _string(table, "schema", where)
    database = str(conninfo.conninfo_to_dict(dsn).get("dbname") or "")
    default = f"{database}/{schema}" if schema else database
    name = _string(table, "name", where) or default
    if not name:
        raise FleetFileError(f"{where}.name: missing, and its dsn names no database")
    return Target(name, dsn, schema, _labels(table, "labels", where))


def _discover(table: dict[str, Any], where: str, environ: dict[str, str]) -> Discover:
    _keys(table, _DISCOVER, where)
    dsn = _dsn(table, where, environ)
    kinds = {k: _string(table, k, where) for k in ("databases", "schemas", "query")}
    given = [k for k, v in kinds.items() if v is not None]
    if len(given) != 1:
        raise FleetFileError(f"{where}: exactly one of databases, schemas, query expected")
    return Discover(
        dsn, kinds["databases"], kinds["schemas"], kinds["query"], _labels(table, "labels", where),
        where,
    )  # fmt: skip


def _wave(table: dict[str, Any], where: str, parallel: int) -> Wave:
    _keys(table, _WAVE, where)
    name = _string(table, "name", where, required=True)
    assert name is not None
    n = table.get("parallel", parallel)
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise FleetFileError(f"{where}.parallel: a whole number of at least 1 expected")
    on_error = table.get("on_error", "stop")
    if on_error not in ON_ERROR:
        raise FleetFileError(f"{where}.on_error: stop or isolate expected, got {on_error!r}")
    most = table.get("max_failures")
    if most is not None:
        if on_error != "isolate":
            raise FleetFileError(f'{where}.max_failures: only with on_error = "isolate"')
        if not isinstance(most, int) or isinstance(most, bool) or most < 0:
            raise FleetFileError(f"{where}.max_failures: a whole number of at least 0 expected")
    return Wave(name, _labels(table, "match", where), n, on_error, most)


def unique(names: list[str], key: str) -> None:
    seen: set[str] = set()
    for i, name in enumerate(names):
        if name in seen:
            raise FleetFileError(f"{key}[{i}].name: {name!r} again: names are unique in a run")
        seen.add(name)
