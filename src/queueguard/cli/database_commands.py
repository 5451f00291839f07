"""The commands that show, serve or fill a database without migrating it: demo, status,
inspect, db, fixtures and snapshot.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

from queueguard.cli.common import _emit_json, _is_other_format, _migration_set, _migrations, _target
from queueguard.errors import UsageError


# demo --------------------------------------------------------------------------------
def cmd_demo(args: argparse.Namespace) -> int:
    from queueguard import demo
    from queueguard.runtime.walkthrough import render

    results = demo.run(_target(args, fallback=True) if args.dsn else None)
    if args.json:
        _emit_json(results)
    else:
        print(render("memory store", results["memory"]))
        print()
        print(render("PostgreSQL store", results["postgres"]))
    return 0


# status / inspect --------------------------------------------------------------------
def cmd_status(args: argparse.Namespace) -> int:
    from queueguard.queue_schema.status import status

    if _is_other_format(args):
        return _status_set(args)
    from queueguard.queue_schema.status import render_text

    doc = status(_target(args, fallback=True), _migrations(args))
    if args.json:
        _emit_json(doc)
    else:
        print(render_text(doc))
    return 1 if doc["drift"] else 0


def _status_set(args: argparse.Namespace) -> int:
    """Where a database is in a set of another format: its revision by the format's own
    bookkeeping, the head, what is pending (read only)."""
    from queueguard.engine.plan.planner import current_revision
    from queueguard.sets.model import heads_of

    mset = _migration_set(args)
    dsn = _target(args, fallback=True)
    at = current_revision(mset, dsn)
    pending = [r.id for r in mset.pending(at)]
    django = mset.format == "django"  # an applied set, not a position: said as it is
    doc: dict[str, Any] = {
        "format": mset.format,
        # one-revision fields: null where a set (or a database) is at several heads,
        # the lists beside them say which
        "revision": None if django or (at and "," in at) else at,
        "currentHeads": [] if django else list(heads_of(at)),
        "head": mset.heads[0] if len(mset.heads) == 1 else None,
        "heads": list(mset.heads),
        "pending": pending,
        "inFlight": _in_flight(dsn),
    }
    if django:
        from queueguard.sets import django as django_format

        doc["latestApplied"] = django_format.latest_applied(mset, at)
    if args.json:
        _emit_json(doc)
    else:
        print(f"format    {mset.format}")
        if django:
            latest = doc["latestApplied"]
            shown = ", ".join(f"{app}.{name}" for app, name in sorted(latest.items()))
            print(f"applied   {shown or 'none (nothing of the project applied)'}")
        else:
            print(f"revision  {', '.join(heads_of(at)) or 'none (nothing of the set applied)'}")
        print(f"head      {', '.join(mset.heads) or 'none (an empty set)'}")
        print(f"pending   {', '.join(pending) or 'none'}")
        flight = doc["inFlight"]
        if flight:
            print(
                f"in flight revision {flight['revision']} statement {flight['statement']}, "
                f"online: {', '.join(flight['forms'])} ({flight['done']} of "
                f"{len(flight['forms'])} done); rerun `upgrade --online` to finish it or "
                "`--phase abort` to undo it"
            )
            if flight["rebuild"]:
                print(f"  rebuild   {flight['rebuild']}")
    return 0


def _in_flight(dsn: str) -> dict[str, Any] | None:
    """The statement an `upgrade --online` began and did not finish (read only)."""
    from queueguard.engine.apply import progress
    from queueguard.engine.online.apply import decode
    from queueguard.engine.online.choose import REBUILD
    from queueguard.engine.online.rebuild import status as rebuild_status
    from queueguard.engine.plan.sample import read_only

    with read_only(dsn) as conn:
        found = progress.in_flight(conn)
        if found is None:
            return None
        revision, index, text, done = found
        forms = decode(text)
        where = None
        if done < len(forms) and forms[done].kind == REBUILD:
            where = rebuild_status.phase(conn, forms[done])
        conn.rollback()
    return {
        "revision": revision,
        "statement": index + 1,
        "forms": [f.kind for f in forms],
        "done": done,
        "rebuild": where,
    }


def cmd_inspect(args: argparse.Namespace) -> int:
    from queueguard.queue_schema.status import inspect_workflow

    doc = inspect_workflow(_target(args, fallback=True), args.workflow_id, args.namespace)
    if args.json:
        _emit_json(doc)
        return 0
    for table in ("task_queues", "tasks"):
        rows = doc[table]
        print(f"{table}: {len(rows)} row(s)" if rows else f"{table}: no rows")
        for row in rows:
            print("  " + ", ".join(f"{k} {_value(v)}" for k, v in row.items()))
    return 0


def _value(v: object) -> str:
    """A row's value for a terminal: text as it is, anything else as JSON (never a repr)."""
    return v if isinstance(v, str) else json.dumps(v, ensure_ascii=False, default=str)


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


# fixtures / snapshot -----------------------------------------------------------------
def cmd_fixtures(args: argparse.Namespace) -> int:
    from queueguard.queue_schema import golden as fixtures

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
    from queueguard.queue_schema import snapshots

    if args.action == "export":
        doc = snapshots.export(_target(args, fallback=True))
        text = json.dumps(doc, indent=2, ensure_ascii=False, sort_keys=True)
        if args.output:
            Path(args.output).write_text(text + "\n", encoding="utf-8")
        else:
            print(text)
        return 0
    if not args.file:
        raise UsageError("snapshot import needs a FILE")
    doc = snapshots.read(Path(args.file))
    queues = len(doc["queues"])
    tasks = sum(len(q["tasks"]) for q in doc["queues"])
    if not (args.dsn or args.embedded or os.environ.get("QUEUEGUARD_DSN")):
        print(
            f"valid snapshot: {queues} queues, {tasks} tasks (validated only; pass --dsn to import)"
        )
        return 0
    snapshots.import_into(_target(args, fallback=False), doc)
    print(f"imported {queues} queues, {tasks} tasks")
    return 0
