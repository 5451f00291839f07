"""Temporal's SQL schema directories (`schema/postgresql/v12/temporal/versioned/` and the
like), read the way `temporal-sql-tool update-schema` reads them, and the two bookkeeping
tables it keeps (`schema_version`, `schema_update_history`).

A set is a folder of version folders `v<major>.<minor>[.<patch>]`, each holding a
`manifest.json`:

    {"CurrVersion": "1.10", "MinCompatibleVersion": "1.0", "Description": "…",
     "SchemaUpdateCqlFiles": ["b.sql", "a.sql"], "AllowNoCqlFiles": false}

The tool's rules, kept here (docs/migration-sets.md "Temporal" has the whole account):
versions are ordered as semantic versions (`1.10` after `1.9`); a folder's name without its
`v` must equal CurrVersion without its `v`; only the listed files are applied, in the
manifest's order; a version without statements is refused unless AllowNoCqlFiles is true;
every statement must start with CREATE, ALTER, INSERT, DROP or DO (case-sensitive, after its
`--` comments); the history row's manifest_md5 is the hex MD5 of the manifest's raw bytes.
Stricter than the tool: every version is checked, not only those after the database's.
"""

from __future__ import annotations

import hashlib
import posixpath
import re
from collections.abc import Mapping
from itertools import pairwise
from pathlib import Path
from typing import Any

import psycopg

from queueguard.errors import UsageError, VersionKeyedElsewhere
from queueguard.pg.sqlfiles import queries
from queueguard.sets.model import MigrationSet, Revision
from queueguard.sets.split import split
from queueguard.sets.temporal_inputs import Manifest, check_statement, decode

FORMAT = "temporal"
MANIFEST = "manifest.json"
#: the tool's `--schema-name` reads `<name>/versioned`; a root holding it is accepted too
VERSIONED = "versioned"
BOOKKEEPING = frozenset({"schema_version", "schema_update_history"})
#: what `setup-schema -v 0.0` records (SetupTask.Run: UpdateSchemaVersion(v, v), then
#: WriteSchemaUpdateLog("0", v, "", "initial version"))
INITIAL_VERSION = "0.0"
SETUP_OLD_VERSION = "0"
SETUP_DESCRIPTION = "initial version"

#: the tool's versionDirectoryRegex (`^v[\d.]+`, a prefix match): folders it does not skip
_CANDIDATE = re.compile(r"v[\d.]+")
#: the versions this module orders: one to three numeric parts, as semver.ParseTolerant reads
#: them without pre-release or build suffixes
_NUMERIC = re.compile(r"\d+(?:\.\d+){0,2}")

Q = queries("queueguard.sets", "temporal.sql")
Conn = psycopg.Connection[Any] | psycopg.Cursor[Any]


# --- versions --------------------------------------------------------------------------------


def version_key(version: str) -> tuple[int, int, int]:
    """The order of a Temporal version (`v1.10`, `1.10`, `1.10.0` and `1.010` are one
    version, after `1.9`): semver.ParseTolerant's reading, missing parts being 0."""
    text = version.strip().removeprefix("v")
    if not _NUMERIC.fullmatch(text):
        raise UsageError(f"not a Temporal schema version: {version!r} (expected e.g. 1.10)")
    parts = [int(p) for p in text.split(".")]
    major, minor, patch = parts + [0] * (3 - len(parts))
    return major, minor, patch


def _normalize(version: str) -> str:
    """normalizeVersionString: the input as written with one leading `v` removed."""
    return version[1:] if version.startswith("v") else version


# --- manifests (pure) ------------------------------------------------------------------------


def parse_manifest(raw: bytes, where: str) -> Manifest:
    """readManifest: decode, check both versions parse, check the file list (unless
    AllowNoCqlFiles), and take the MD5 of the raw bytes."""
    fields = decode(raw, where)
    curr = fields.get("CurrVersion", "")
    minimum = fields.get("MinCompatibleVersion", "")
    for name, value in (("CurrVersion", curr), ("MinCompatibleVersion", minimum)):
        try:
            version_key(value)
        except UsageError:
            raise UsageError(f"{where}: invalid {name} {value!r}") from None
    files = tuple(fields.get("SchemaUpdateCqlFiles", ()))
    allow = bool(fields.get("AllowNoCqlFiles", False))
    if not files and not allow:
        raise UsageError(
            f"{where}: SchemaUpdateCqlFiles lists no files (a version without statements "
            'needs "AllowNoCqlFiles": true)'
        )
    # MD5 is the tool's (a version stamp, not a security digest); usedforsecurity says so.
    md5 = hashlib.md5(raw, usedforsecurity=False).hexdigest()
    return Manifest(
        curr_version=_normalize(curr),
        min_compatible_version=_normalize(minimum),
        description=fields.get("Description", ""),
        files=files,
        allow_no_files=allow,
        md5=md5,
    )


# --- the folder ------------------------------------------------------------------------------


def _versions_root(root: Path) -> Path:
    """The folder holding the version folders: `root`, or `root/versioned` when `root` has
    none of its own (what `--schema-name` reads)."""
    if not _version_dirs(root) and (root / VERSIONED).is_dir():
        return root / VERSIONED
    return root


def _version_dirs(folder: Path) -> list[Path]:
    """Subfolders the tool would consider (name matches `^v[\\d.]+`); the rest it skips."""
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if p.is_dir() and _CANDIDATE.match(p.name))


def detect(root: Path) -> bool:
    """A Temporal set: `root` (or `root/versioned`) holds `v<version>/manifest.json`."""
    return any((d / MANIFEST).is_file() for d in _version_dirs(_versions_root(root)))


def _listed(folder: Path, name: str, where: str) -> tuple[Path, Path]:
    """A listed file as (path on disk, path relative to the version folder). The tool reads
    through an fs.FS rooted at the set with Go's path.Join(dir, name), which cleans `..` and
    keeps a leading `/` inside the set; a path leaving the set is invalid there."""
    joined = posixpath.normpath(f"{folder.name}/{name}")
    if joined == ".." or joined.startswith("../"):
        raise UsageError(f"{where}: listed file {name!r} is outside the set")
    path = folder.parent / joined
    if not path.is_file():
        raise UsageError(f"{where}: listed file {name!r} does not exist ({path})")
    return path, Path(posixpath.relpath(joined, folder.name))


def _statements(paths: list[Path], manifest: Manifest, where: str) -> tuple[str, ...]:
    """Every listed file's statements, in the manifest's order (parseSQLStmts)."""
    statements: list[str] = []
    for path in paths:
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            raise UsageError(f"{path}: not UTF-8 ({exc})") from None
        try:
            split_up = split(text)
        except UsageError as exc:  # the splitter's own error names a line, not the file
            raise UsageError(f"{path}: {exc}") from exc
        for statement in split_up:
            check_statement(statement, str(path))
            statements.append(statement)
    if not statements and not manifest.allow_no_files:
        raise UsageError(f"{where}: its files hold no statements (the tool: found 0 updates)")
    return tuple(statements)


def _checksum(manifest_bytes: bytes, files: list[tuple[Path, Path]]) -> str:
    """sha256 over the manifest and each listed file (name and bytes): what the version
    applies. manifest_md5, the tool's own stamp, covers the manifest only."""
    digest = hashlib.sha256(manifest_bytes)
    for path, relative in files:
        digest.update(b"\0" + relative.as_posix().encode() + b"\0")
        digest.update(path.read_bytes())
    return digest.hexdigest()


def _revision(folder: Path, down: str | None, manifest: Manifest, raw: bytes) -> Revision:
    where = str(folder / MANIFEST)
    files = [_listed(folder, name, where) for name in manifest.files]
    statements = _statements([path for path, _ in files], manifest, where)
    native: Mapping[str, Any] = {
        "min_compatible_version": manifest.min_compatible_version,
        "description": manifest.description,
        "manifest_md5": manifest.md5,
        "manifest": folder / MANIFEST,
    }
    return Revision(
        id=manifest.curr_version,
        down=down,
        title=manifest.description,
        files=tuple(relative for _, relative in files),
        checksum=_checksum(raw, files),
        statements=statements,
        native=native,
    )


def _manifests(root: Path) -> list[tuple[Path, Manifest, bytes]]:
    """Each version folder's manifest, checked against the folder's name, in version order."""
    found: list[tuple[Path, Manifest, bytes]] = []
    for folder in _version_dirs(root):
        version = folder.name[1:]
        if not _NUMERIC.fullmatch(version):
            # The tool skips some of these (v1..2) and applies others (v1.2.3-rc1 is valid
            # semver): refuse rather than guess which.
            raise UsageError(f"{folder}: not a version folder name v<major>.<minor>[.<patch>]")
        path = folder / MANIFEST
        if not path.is_file():
            raise UsageError(f"{folder}: no {MANIFEST}")
        raw = path.read_bytes()
        manifest = parse_manifest(raw, str(path))
        if manifest.curr_version != version:
            raise UsageError(
                f"{path}: CurrVersion {manifest.curr_version!r} does not match the folder "
                f"name {folder.name!r} (the tool requires the name to be 'v' + CurrVersion)"
            )
        found.append((folder, manifest, raw))
    found.sort(key=lambda item: version_key(item[1].curr_version))
    for (first, a, _), (second, b, _) in pairwise(found):
        if version_key(a.curr_version) == version_key(b.curr_version):
            raise UsageError(
                f"{root}: {first.name} and {second.name} are the same version "
                f"{'.'.join(map(str, version_key(a.curr_version)))}"
            )
    return found


def load(root: Path) -> MigrationSet:
    """The set in `root` (or `root/versioned`), first version to head."""
    folder = _versions_root(root)
    manifests = _manifests(folder)
    if not manifests:
        raise UsageError(f"{root}: no version folders v<major>.<minor> holding {MANIFEST}")
    revisions: list[Revision] = []
    down: str | None = None
    for path, manifest, raw in manifests:
        revisions.append(_revision(path, down, manifest, raw))
        down = manifest.curr_version
    return MigrationSet(
        format=FORMAT,
        root=folder,
        revisions=tuple(revisions),
        bookkeeping=BOOKKEEPING,
        order=version_key,
    )


# --- bookkeeping (the caller's transaction; these write nothing else) -------------------------


def current(conn: Conn) -> str | None:
    """The database's Temporal version (ReadSchemaVersion), None without the table or row.
    Only SELECTs: a missing table is looked up, not provoked, so the caller's transaction
    stays usable. A table with no row for this database but rows for other names (a
    database restored under another name) is refused: read as empty, the upgrade would
    find every object of the first version there."""
    exists = conn.execute(Q["version_table_exists"]).fetchone()
    if not exists or not exists[0]:
        return None
    row = conn.execute(Q["read_version"]).fetchone()
    if row is None:
        others = [(str(r[0]), r[1]) for r in conn.execute(Q["other_versions"]).fetchall()]
        if others:
            database = conn.execute("SELECT current_database()").fetchone()
            raise VersionKeyedElsewhere(
                keyed_elsewhere(str(database[0] if database else ""), others)
            )
    return None if row is None or row[0] is None else str(row[0])


def take_over_statement(db_name: str) -> str:
    """The statement that makes `db_name`'s version row this database's (pure)."""
    return (
        "UPDATE schema_version SET db_name = current_database() WHERE version_partition = 0 "
        f"AND db_name = '{db_name.replace(chr(39), chr(39) * 2)}';"
    )


def keyed_elsewhere(database: str, others: list[tuple[str, str | None]]) -> str:
    """What a restored database's version rows say, and the statement that adopts one (pure)."""
    rows = ", ".join(f"{name} at {version or 'no version'}" for name, version in others)
    what = "one" if len(others) == 1 else f"{len(others)} rows"
    adopt = (
        f"adopt it: {take_over_statement(others[0][0])}"
        if len(others) == 1
        else f"adopt the one it was restored from: {take_over_statement('NAME')}"
    )
    return (
        f"no version row for database {database}; schema_version has {what} for {rows} "
        f"(restored under another name?); nothing was changed. To {adopt}"
    )


def take_over_version(conn: Conn, db_name: str) -> int:
    """Make `db_name`'s version row this database's (a copy restored under another name,
    as the tool would read it there); the number of rows moved (0 without the table)."""
    exists = conn.execute(Q["version_table_exists"]).fetchone()
    if not exists or not exists[0]:
        return 0
    cursor = conn.execute(Q["take_over_version"], {"db_name": db_name})
    return cursor.rowcount if cursor.rowcount is not None else 0


def setup_statements() -> list[tuple[str, dict[str, Any]]]:
    """What `temporal-sql-tool setup-schema -v 0.0` runs on a database without a version
    row, in order: CreateSchemaVersionTables, UpdateSchemaVersion("0.0", "0.0"),
    WriteSchemaUpdateLog("0", "0.0", "", "initial version")."""
    return [
        (Q["create_schema_version"], {}),
        (Q["create_schema_update_history"], {}),
        *_record_statements(
            INITIAL_VERSION, INITIAL_VERSION, SETUP_OLD_VERSION, "", SETUP_DESCRIPTION
        ),
    ]


def setup(conn: Conn) -> None:
    """`setup-schema -v 0.0`: both tables, then the 0.0 rows, unless the database is
    already past 0.0 (the tool then only creates the tables if missing)."""
    statements = setup_statements()
    creates, writes = statements[:2], statements[2:]
    for sql, params in creates:
        conn.execute(sql, params)
    at = current(conn)
    if at is not None and version_key(at) > version_key(INITIAL_VERSION):
        return
    for sql, params in writes:
        conn.execute(sql, params)


def _record_statements(
    version: str, min_compatible: str, old: str, md5: str, description: str
) -> list[tuple[str, dict[str, Any]]]:
    return [
        (Q["write_version"], {"curr_version": version, "min_compatible_version": min_compatible}),
        (
            Q["write_history"],
            {
                "old_version": old,
                "new_version": version,
                "manifest_md5": md5,
                "description": description,
            },
        ),
    ]


def record_statements(revision: Revision, previous: str) -> list[tuple[str, dict[str, Any]]]:
    """What one update-schema step writes after the version's statements
    (UpdateTask.updateSchemaVersion): the schema_version upsert, then one history row from
    `previous` (the version the database was at) to `revision`."""
    native = revision.native
    return _record_statements(
        revision.id,
        str(native["min_compatible_version"]),
        previous,
        str(native["manifest_md5"]),
        str(native["description"]),
    )


def record(conn: Conn, revision: Revision, previous: str) -> None:
    """Write one update-schema step's bookkeeping, nothing else."""
    for sql, params in record_statements(revision, previous):
        conn.execute(sql, params)
