"""`fleet verify` (read only): every target at head, and every target's catalog the same as
the others'. A schema target's own schema name is replaced by a placeholder (references to
other schemas are kept); the ledgers and queueguard's own objects are left out. Targets are
grouped by the fingerprint of their catalog; the largest group is the reference (on a tie,
the group equal to `--fresh`, else the one holding the first target), and each target
outside it is named with every object that differs, by name."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import psycopg

from queueguard.errors import QueueguardError
from queueguard.fleet import apply
from queueguard.fleet.resolved import Fleet
from queueguard.fleet.state import said, said_target, shown, shown_target
from queueguard.fleet.targets import Target
from queueguard.pg.connect import connect, reason
from queueguard.pg.sqlfiles import queries

Q = queries("queueguard.fleet", "fleet.sql")
PLACEHOLDER = "{schema}"
#: the ledgers of every format, and what a run leaves only while it goes
LEDGERS = ("queueguard_sqldir_ledger", "schema_version", "schema_update_history",
           "alembic_version", "queueguard_version", "queueguard_progress")  # fmt: skip

Objects = dict[tuple[str, str], str]


def normalise(objects: Sequence[tuple[str, str, str]], schema: str | None) -> Objects:
    """{(kind, name): definition}, the target's own schema replaced by the placeholder: in
    a name, its first part only (a table may bear the schema's name); in a definition,
    wherever the schema qualifies a name. A function's definition is kept as a digest,
    taken after the replacement (its text names the schema)."""
    if schema is None:
        return {(k, n): _short(k, d) for k, n, d in objects}
    quoted = '"' + schema.replace('"', '""') + '"'
    own = {quoted, schema}
    pattern = re.compile(
        "(?:" + re.escape(quoted) + r"|(?<![\w\"$.])" + re.escape(schema) + r")(?=\.)"
    )
    found = {}
    for kind, name, definition in objects:
        first, dot, rest = name.partition(".")
        key = f"{PLACEHOLDER}{dot}{rest}" if first in own else name
        found[(kind, key)] = _short(kind, pattern.sub(PLACEHOLDER, definition or ""))
    return found


def _short(kind: str, definition: str) -> str:
    if kind == "function":
        return hashlib.md5(definition.encode()).hexdigest()  # a digest of the text, no secret
    return definition


def fingerprint(objects: Objects) -> str:
    text = "\n".join(f"{k} {n} {d}" for (k, n), d in sorted(objects.items()))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def read(
    conn: psycopg.Connection[Any], schemas: list[str], skip: list[str]
) -> list[tuple[str, str, str]]:
    conn.execute("SET LOCAL search_path = pg_catalog")
    rows = conn.execute(Q["catalog"], {"schemas": schemas, "skip": skip}).fetchall()
    conn.rollback()
    return [(r[0], r[1], r[2] or "") for r in rows]


def catalog_of(dsn: str, schema: str | None, skip: list[str]) -> Objects:
    with connect(dsn, application_name="queueguard-fleet") as conn:
        conn.read_only = True
        if schema is None:
            schemas = [r[0] for r in conn.execute(Q["user_schemas"]).fetchall()]
            conn.rollback()
        else:
            schemas = [schema]
        return normalise(read(conn, schemas, skip), schema)


def differences(reference: Objects, theirs: Objects) -> list[str]:
    found = []
    for key in sorted(reference.keys() | theirs.keys()):
        kind, name = key
        if key not in theirs:
            found.append(f"missing {kind} {name}")
        elif key not in reference:
            found.append(f"extra {kind} {name}: {theirs[key][:200]}")
        elif reference[key] != theirs[key]:
            found.append(
                f"{kind} {name} differs: {theirs[key][:200]} (reference: {reference[key][:200]})"
            )
    return found


def verify(fleet: Fleet, fresh: Path | None = None) -> dict[str, Any]:
    mset = fleet.mset
    head = mset.resolve(None)  # an Alembic set at several heads: all of them (`a,b`)
    skip = sorted(set(LEDGERS) | set(mset.bookkeeping))

    def one(t: Target) -> dict[str, Any]:
        try:
            at = apply.current(mset, t)
            objects = catalog_of(apply.session_dsn(t), t.schema, skip)
        except (QueueguardError, psycopg.Error) as exc:
            message = reason(exc) if isinstance(exc, psycopg.Error) else str(exc)
            return {"name": t.name, "reached": False, "error": message.splitlines()[0]}
        return {"name": t.name, "reached": True, **said(mset, at), "atHead": mset.at_head(at),
                "objects": objects, "fingerprint": fingerprint(objects)}  # fmt: skip

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(one, fleet.targets))
    reached = [r for r in results if r["reached"]]
    groups: dict[str, list[str]] = {}
    for r in reached:
        groups.setdefault(r["fingerprint"], []).append(r["name"])
    fresh_objects = _fresh(fresh, skip, any(t.schema for t in fleet.targets)) if fresh else None
    fresh_print = fingerprint(fresh_objects) if fresh_objects is not None else None
    reference, why = _reference(groups, reached, fresh_print)
    by_print = {r["fingerprint"]: r["objects"] for r in reached}
    targets = []
    for r in results:
        entry = {k: v for k, v in r.items() if k != "objects"}
        if r["reached"] and reference is not None and r["fingerprint"] != reference:
            entry["differences"] = differences(by_print[reference], r["objects"])
        targets.append(entry)
    fresh_diff = (
        {g: differences(fresh_objects, by_print[g]) for g in groups if g != fresh_print}
        if fresh_objects is not None
        else {}
    )
    ok = (
        bool(results)
        and all(r["reached"] and r["atHead"] for r in results)
        and len(groups) == 1
        and not any(fresh_diff.values())
    )
    return {
        **said_target(mset, head, "head", "heads"),
        "ok": ok,
        "groups": [{"fingerprint": g, "targets": names, "reference": g == reference}
                   for g, names in sorted(groups.items(), key=lambda kv: -len(kv[1]))],
        "reference": {"fingerprint": reference, "chosen": why},
        "fresh": None if fresh is None else {"path": str(fresh), "fingerprint": fresh_print,
                                             "differences": fresh_diff},
        "targets": targets,
    }  # fmt: skip


def _reference(
    groups: dict[str, list[str]], reached: list[dict[str, Any]], fresh: str | None
) -> tuple[str | None, str]:
    if not groups:
        return None, "no target reached"
    most = max(len(v) for v in groups.values())
    largest = [g for g, names in groups.items() if len(names) == most]
    if len(largest) == 1:
        return largest[0], "the largest group"
    if fresh in largest:
        return fresh, "a tie: the group equal to --fresh"
    first = reached[0]["fingerprint"]
    if first in largest:
        return first, "a tie: the group holding the first target"
    return largest[0], "a tie: the first of the largest groups"


def _fresh(path: Path, skip: list[str], as_schema: bool) -> Objects:
    """The catalog a fresh install gives: the file run on a scratch database."""
    from queueguard.pg import scratch
    from queueguard.sets.split import split

    statements = split(path.read_text(encoding="utf-8"), source=str(path))
    admin = scratch.server_dsn()
    dsn = scratch.create_database(admin, prefix="qgfleetfresh")
    try:
        with connect(dsn, autocommit=True) as conn:
            for statement in statements:
                conn.execute(statement)
        return catalog_of(dsn, "public" if as_schema else None, skip)
    finally:
        scratch.drop_database(admin, scratch.dbname_of(dsn))


def text(doc: dict[str, Any]) -> str:
    head = shown_target(doc, "head", "heads")
    lines = [f"fleet verify: {'ok' if doc['ok'] else 'FAILED'} (head {head})"]
    for g in doc["groups"]:
        mark = " (reference: " + doc["reference"]["chosen"] + ")" if g["reference"] else ""
        lines.append(f"  catalog {g['fingerprint']}: {len(g['targets'])} target(s){mark}")
    for t in doc["targets"]:
        if not t["reached"]:
            lines.append(f"  {t['name']}: unreachable: {t['error']}")
            continue
        if not t["atHead"]:
            lines.append(f"  {t['name']}: at {shown(t)}, not head {head}")
        for d in t.get("differences", []):
            lines.append(f"  {t['name']}: {d}")
    fresh = doc.get("fresh")
    if fresh:
        for g, diffs in fresh["differences"].items():
            for d in diffs:
                lines.append(f"  catalog {g} against {fresh['path']}: {d}")
    return "\n".join(lines)


def markdown(doc: dict[str, Any]) -> str:
    lines = [f"### queueguard fleet verify: {'ok' if doc['ok'] else 'failed'}", "",
             "| target | revision | catalog | differences |", "|---|---|---|---|"]  # fmt: skip
    for t in doc["targets"]:
        if not t["reached"]:
            lines.append(f"| {t['name']} | unreachable | | {t['error']} |")
            continue
        diffs = "<br>".join(d.replace("|", "\\|") for d in t.get("differences", []))
        lines.append(f"| {t['name']} | {shown(t) or ''} | {t['fingerprint']} | {diffs} |")
    return "\n".join(lines) + "\n"
