"""The `queueguard` command line: thin wrappers that parse, call a function, and render.

Data goes to stdout, logs and progress to stderr. Exit codes: 0 ok, 1 findings/refusal/bad
input file, 2 usage error or unreachable server.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from queueguard import __version__
from queueguard.errors import QueueguardError, UsageError
from queueguard.pg.dsn import redact
from queueguard.style import wants_color

if TYPE_CHECKING:
    from queueguard.revisions import MigrationSet

Handler = Callable[[argparse.Namespace], int]


def _emit_json(doc: dict[str, Any]) -> None:
    doc = {"schemaVersion": 1, **doc}
    print(json.dumps(doc, indent=2, default=str, ensure_ascii=False))


def _migrations(args: argparse.Namespace) -> MigrationSet:
    """The migration set `--migrations DIR` names (default: the packaged one)."""
    from queueguard import revisions

    folder = getattr(args, "migrations", None)
    return revisions.load(Path(folder)) if folder else revisions.packaged()


def _target(args: argparse.Namespace, *, fallback: bool) -> str:
    from queueguard.pg import targets

    dsn = targets.resolve(
        getattr(args, "dsn", None), embedded=getattr(args, "embedded", False), fallback=fallback
    )
    if not fallback:
        print(f"target: {redact(dsn)}", file=sys.stderr)
    return dsn


# demo --------------------------------------------------------------------------------
def cmd_demo(args: argparse.Namespace) -> int:
    import uuid

    from queueguard.pg import scratch
    from queueguard.runtime import demo
    from queueguard.stores.memory import MemoryStore
    from queueguard.stores.postgres import PostgresStore

    results: dict[str, Any] = {"memory": demo.walkthrough(MemoryStore())}
    if args.dsn:
        store = PostgresStore(_target(args, fallback=True), host_id="demo")
        try:
            results["postgres"] = demo.walkthrough(store, namespace=f"demo-{uuid.uuid4().hex[:8]}")
        finally:
            store.close()
    else:  # a scratch database on the embedded server, dropped afterwards
        admin = scratch.server_dsn("embedded")
        dsn = scratch.create_database(admin, prefix="qg_demo")
        try:
            store = PostgresStore(dsn, host_id="demo")
            try:
                results["postgres"] = demo.walkthrough(store)
            finally:
                store.close()
        finally:
            scratch.drop_database(admin, scratch.dbname_of(dsn))
    if args.json:
        _emit_json(results)
    else:
        print(demo.render("memory store", results["memory"]))
        print()
        print(demo.render("PostgreSQL store", results["postgres"]))
    return 0


# status / inspect --------------------------------------------------------------------
def cmd_status(args: argparse.Namespace) -> int:
    from queueguard.upgrade.status import status

    doc = status(_target(args, fallback=True), _migrations(args))
    if args.json:
        _emit_json(doc)
    else:
        for key in ("revision", "head", "protocol", "queues", "tasks", "drift"):
            print(f"{key:9} {doc.get(key)}")
    return 1 if doc["drift"] else 0


def cmd_inspect(args: argparse.Namespace) -> int:
    from queueguard.upgrade.status import inspect_workflow

    doc = inspect_workflow(_target(args, fallback=True), args.workflow_id, args.namespace)
    if args.json:
        _emit_json(doc)
        return 0
    print("task_queues:")
    for row in doc["task_queues"]:
        print(f"  {row}")
    print("tasks:")
    for row in doc["tasks"]:
        print(f"  {row}")
    return 0


# db ----------------------------------------------------------------------------------
def cmd_db(args: argparse.Namespace) -> int:
    from queueguard.pg import servers, targets

    server = servers.embedded_server()
    if args.action == "url":
        print(targets.embedded_dsn())
    elif args.action == "start":
        server.ensure_running()
        print(f"running: {server.data_dir} (socket {server.socket_dir})")
    else:
        print("stopped" if server.stop() else "not running")
    return 0


# upgrade -----------------------------------------------------------------------------
def cmd_upgrade(args: argparse.Namespace) -> int:
    from queueguard.pg.targets import parse_duration_ms
    from queueguard.upgrade import runner

    migrations = _migrations(args)
    if args.sql:
        print(runner.render_sql(args.to, migrations=migrations))
        return 0
    dsn = _target(args, fallback=False)
    report = runner.upgrade(
        dsn,
        to=args.to,
        lock_timeout_ms=parse_duration_ms(args.lock_timeout),
        statement_timeout_ms=parse_duration_ms(args.statement_timeout),
        retries=args.retries,
        force=args.force,
        progress=not args.json,
        migrations=migrations,
    )
    if args.json:
        _emit_json(report.as_json())
    elif not report.applied:
        print(f"already at {report.after} (nothing to do)")
    else:
        print(
            f"upgraded {report.before or 'empty'} -> {report.after} "
            f"(applied {', '.join(report.applied)}) in {report.elapsed_ms} ms"
        )
        for queue, rows in report.relocated.items():
            print(f"  relocated {rows} rows from {queue}")
        if report.queues_fenced:
            protocol = migrations.get(report.after or "").protocol
            print(f"  fenced {report.queues_fenced} queues; protocol is now {protocol}")
        print(f"  lock waits: {report.lock_waits}")
    return 0


# verify / fixtures / snapshot / rehearse ----------------------------------------------------
def cmd_verify(args: argparse.Namespace) -> int:
    from queueguard.pg import scratch
    from queueguard.upgrade import verify

    admin = args.dsn or scratch.server_dsn()

    def progress(line: str) -> None:
        print(f"verify: {line}", file=sys.stderr, flush=True)

    report = verify.verify(
        admin,
        args.fixture or None,
        progress=None if args.json else progress,
        migrations=_migrations(args),
        fixtures_root=Path(args.fixtures) if args.fixtures else None,
    )
    if args.json:
        _emit_json(report.as_json())
    else:
        print(verify.render(report, color=wants_color(sys.stdout)))
    return 0 if report.ok else 1


def cmd_fixtures(args: argparse.Namespace) -> int:
    from queueguard.upgrade import golden as fixtures

    if args.action == "list":
        rows = [
            {"name": f.name, "revision": f.revision, "exercises": f.manifest["exercises"]}
            for f in fixtures.all_fixtures()
        ]
        if args.json:
            _emit_json({"fixtures": rows})
        else:
            for row in rows:
                print(f"{row['name']:6} revision {row['revision']}: {'; '.join(row['exercises'])}")
        return 0
    if not args.name:
        raise UsageError("fixtures load needs a fixture NAME")
    fixture = fixtures.get(args.name)
    dsn = _target(args, fallback=False)
    fixtures.load(fixture, dsn)
    print(f"loaded fixture {fixture.name} (revision {fixture.revision})")
    return 0


def cmd_snapshot(args: argparse.Namespace) -> int:
    from queueguard import snapshot
    from queueguard.pg.connect import connection
    from queueguard.upgrade import state

    if args.action == "export":
        with connection(_target(args, fallback=True)) as conn:
            doc = state.export_database(conn)
        text = json.dumps(doc, indent=2, ensure_ascii=False, sort_keys=True)
        if args.output:
            Path(args.output).write_text(text + "\n", encoding="utf-8")
        else:
            print(text)
        return 0
    if not args.file:
        raise UsageError("snapshot import needs a FILE")
    try:
        raw = Path(args.file).read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read {args.file}: {exc.strerror}") from None
    doc = snapshot.parse(raw)
    queues = len(doc["queues"])
    tasks = sum(len(q["tasks"]) for q in doc["queues"])
    if not (args.dsn or args.embedded or os.environ.get("QUEUEGUARD_DSN")):
        print(
            f"valid snapshot: {queues} queues, {tasks} tasks (validated only; pass --dsn to import)"
        )
        return 0
    from queueguard.upgrade.runner import upgrade

    dsn = _target(args, fallback=False)
    from queueguard.stores import schema

    with connection(dsn) as conn:
        found = schema.inspect(conn)
    if found.tables and found.revision != _migrations(args).head.id:
        raise QueueguardError(
            "refusing to import: the target database is neither empty nor "
            "an empty head-schema database"
        )
    upgrade(dsn, progress=False)  # head schema for an empty database; no-op at head
    with connection(dsn) as conn, conn.transaction():
        state.load_document(conn, doc)
    print(f"imported {queues} queues, {tasks} tasks")
    return 0


def cmd_rehearse(args: argparse.Namespace) -> int:
    from queueguard.upgrade.rehearse import rehearse

    result = rehearse(_target(args, fallback=False), args.scratch_dsn)
    if args.json:
        _emit_json(result.as_json())
    else:
        print(
            f"rehearsed upgrade of a {result.method} copy (source revision "
            f"{result.source_revision}) in {result.elapsed_ms} ms"
        )
        for q in result.queues:
            print(
                f"  {q['queue']}: range {q['range']} ack {q['ack']} last {q['last']} "
                f"rows {q['rows']}"
            )
        for v in result.violations:
            print(f"VIOLATION: {v}")
        print("conservation laws hold" if result.ok else "REHEARSAL FAILED")
    return 0 if result.ok else 1


# preflight ---------------------------------------------------------------------------
def cmd_preflight(args: argparse.Namespace) -> int:
    from queueguard.pg.targets import parse_duration_ms
    from queueguard.upgrade.preflight import preflight, render_text

    report = preflight(
        _target(args, fallback=False),
        target=args.target,
        lock_timeout_ms=parse_duration_ms(args.lock_timeout),
        statement_timeout_ms=parse_duration_ms(args.statement_timeout),
        samples=args.samples,
        migrations=_migrations(args),
    )
    if args.json:
        _emit_json(report.as_json())
    else:
        print(render_text(report, args.fail_on, color=wants_color(sys.stdout)))
    return report.exit_code(args.fail_on)


# lint --------------------------------------------------------------------------------
def cmd_lint(args: argparse.Namespace) -> int:
    from queueguard.lint import lint
    from queueguard.resources import audit_dir

    paths = args.paths or (
        [Path(args.migrations), Path(str(audit_dir()))] if args.migrations else None
    )
    report = lint(paths)
    if args.json:
        _emit_json(report.as_json())
    elif report.findings:
        print(report.render_text())
    print(report.summary(), file=sys.stderr)
    return report.exit_code


# manifest ----------------------------------------------------------------------------
def cmd_manifest(args: argparse.Namespace) -> int:
    from queueguard.upgrade import manifest

    migrations = _migrations(args)
    if args.write:
        manifest.write(migrations.root)
        print(f"manifest written: {len(migrations.ids)} revisions ({migrations.span})")
        return 0
    problems = manifest.verify(migrations.root)
    if args.json:
        _emit_json({"ok": not problems, "revisions": list(migrations.ids), "problems": problems})
    elif problems:
        print("\n".join(f"manifest: {p}" for p in problems))
    else:
        print(f"manifest intact: {len(migrations.ids)} revisions ({migrations.span})")
    return 1 if problems else 0


# parser ------------------------------------------------------------------------------
#: One example per command, shown at the end of its --help.
EXAMPLES = {
    "demo": "queueguard demo --json",
    "status": 'queueguard status --dsn "$DSN"',
    "inspect": 'queueguard inspect order-42 --namespace default --dsn "$DSN"',
    "db": "queueguard db url",
    "upgrade": 'queueguard upgrade --dsn "$DSN" --lock-timeout 2s --retries 5\n'
    "  queueguard upgrade --sql > upgrade.sql",
    "preflight": 'queueguard preflight --dsn "$DSN" --fail-on warning --json',
    "verify": "queueguard verify --fixture v0.3",
    "fixtures": 'queueguard fixtures load v0.3 --dsn "$DSN"',
    "snapshot": "queueguard snapshot import backup.json          # validate only\n"
    '  queueguard snapshot import backup.json --dsn "$DSN"',
    "rehearse": 'queueguard rehearse --dsn "$PROD_DSN" --scratch-dsn "$SCRATCH_DSN"',
    "lint": "queueguard lint migrations/ --json",
    "manifest": "queueguard manifest --write --migrations ./migrations",
}


def _add_examples(sub: Any) -> None:
    for name, command in sub.choices.items():
        command.formatter_class = argparse.RawDescriptionHelpFormatter
        command.epilog = f"example:\n  {EXAMPLES[name]}"


def _add_dsn(p: argparse.ArgumentParser, *, explicit: bool = False) -> None:
    p.add_argument(
        "--dsn",
        help="PostgreSQL DSN (default: $QUEUEGUARD_DSN"
        + (")" if explicit else ", else the embedded server)"),
    )
    if explicit:
        p.add_argument("--embedded", action="store_true", help="target the embedded server")


def _add_migrations(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--migrations",
        metavar="DIR",
        help="the migration set (an Alembic script directory; default: the packaged one)",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="queueguard", description=__doc__)
    parser.add_argument("--version", action="version", version=f"queueguard {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("demo", help="the queue lifecycle walkthrough (memory and PostgreSQL)")
    _add_dsn(p)
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=cmd_demo)

    p = sub.add_parser("status", help="revision, protocol, queue and row counts")
    _add_dsn(p)
    _add_migrations(p)
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=cmd_status)

    p = sub.add_parser("inspect", help="both Matching tables' rows for one workflow")
    p.add_argument("workflow_id")
    p.add_argument("--namespace")
    _add_dsn(p)
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=cmd_inspect)

    p = sub.add_parser("db", help="the embedded PostgreSQL server")
    p.add_argument("action", choices=["url", "start", "stop"])
    p.set_defaults(handler=cmd_db)

    p = sub.add_parser("upgrade", help="apply the migrations (explicit target)")
    _add_dsn(p, explicit=True)
    p.add_argument("--to", default="head", help="a revision id or head")
    p.add_argument("--sql", action="store_true", help="render the SQL without connecting")
    p.add_argument("--lock-timeout", default="5s")
    p.add_argument("--statement-timeout", default="60m", help="per statement (0 = no limit)")
    p.add_argument("--retries", type=int, default=3, help="retries after the first attempt")
    p.add_argument("--force", action="store_true", help="upgrade even with older hosts connected")
    _add_migrations(p)
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=cmd_upgrade)

    p = sub.add_parser("preflight", help="read-only, bounded-lock audit before an upgrade")
    _add_dsn(p, explicit=True)
    p.add_argument("--target", default="head", help="a revision id or head")
    p.add_argument("--lock-timeout", default="5s", help="per lock wait (default 5s)")
    p.add_argument("--statement-timeout", default="60s", help="per check (default 60s)")
    p.add_argument("--samples", type=int, default=10, help="samples per finding (0…1000)")
    p.add_argument("--fail-on", choices=["blocking", "warning"], default="blocking")
    _add_migrations(p)
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=cmd_preflight)
    p = sub.add_parser("verify", help="upgrade CI against the golden fixtures")
    p.add_argument(
        "--dsn",
        help="admin DSN of a server for scratch databases "
        "(default: QUEUEGUARD_PG, the embedded server)",
    )
    p.add_argument("--fixture", action="append", help="only this fixture (repeatable)")
    p.add_argument(
        "--fixtures", metavar="DIR", help="the golden fixtures (default: the packaged ones)"
    )
    _add_migrations(p)
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=cmd_verify)

    p = sub.add_parser("fixtures", help="list or load the golden fixtures")
    p.add_argument("action", choices=["list", "load"])
    p.add_argument("name", nargs="?")
    _add_dsn(p, explicit=True)
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=cmd_fixtures)

    p = sub.add_parser("snapshot", help="export or import (validate) a snapshot")
    p.add_argument("action", choices=["export", "import"])
    p.add_argument("file", nargs="?", help="snapshot file to import")
    p.add_argument("-o", "--output", help="export: write to this file")
    _add_dsn(p, explicit=True)
    p.set_defaults(handler=cmd_snapshot)

    p = sub.add_parser("rehearse", help="rehearse the upgrade on a copy of a database")
    _add_dsn(p, explicit=True)
    p.add_argument(
        "--scratch-dsn", help="admin DSN of the server for the copy (default: the source server)"
    )
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=cmd_rehearse)

    p = sub.add_parser(
        "lint",
        help="the migration safety gate: squawk's rules and queueguard's own (docs/lint.md)",
    )
    p.add_argument(
        "paths",
        nargs="*",
        metavar="PATH",
        help="migration directories, step files, audit queries or .sql files "
        "(default: the packaged migrations/ and audit_queries/)",
    )
    p.add_argument("--json", action="store_true")
    _add_migrations(p)
    p.set_defaults(handler=cmd_lint)

    p = sub.add_parser("manifest", help="check (or --write) the migration set's manifest")
    p.add_argument("--write", action="store_true", help="regenerate it (releasing a revision)")
    _add_migrations(p)
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=cmd_manifest)
    _add_examples(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse exits 2 on usage errors already
        return int(exc.code or 0)
    handler: Handler = args.handler
    try:
        return handler(args)
    except QueueguardError as exc:
        print(f"queueguard: error: {redact(str(exc))}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
