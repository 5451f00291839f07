"""`queueguard`: a fenced task-queue runtime on PostgreSQL and the framework that upgrades it.

Each command parses its arguments, calls one function and renders the result. Data goes to
stdout, logs and progress to stderr. Exit codes: 0 ok, 1 findings/refusal/bad input file,
2 usage error or unreachable server.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from queueguard.errors import UsageError
from queueguard.pg.dsn import redact
from queueguard.style import wants_color

if TYPE_CHECKING:
    from queueguard.revisions import SetFacts

Handler = Callable[[argparse.Namespace], int]


def _emit_json(doc: dict[str, Any]) -> None:
    doc = {"schemaVersion": 1, **doc}
    print(json.dumps(doc, indent=2, default=str, ensure_ascii=False))


def _migrations(args: argparse.Namespace) -> SetFacts:
    """The migration set `--migrations DIR` names (default: the packaged one)."""
    from queueguard import revisions

    folder = getattr(args, "migrations", None)
    if folder and _is_foreign(args):
        from queueguard import sets

        raise UsageError(
            f"{folder} is a {sets.detect(Path(str(folder)).resolve())} migration set: "
            f"`{args.command}` works on queueguard's own; for a set of another format use "
            "status, plan, upgrade, rehearse, verify or lint"
        )
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
    from queueguard.upgrade.status import status

    if _is_foreign(args):
        return _status_foreign(args)
    doc = status(_target(args, fallback=True), _migrations(args))
    if args.json:
        _emit_json(doc)
    else:
        for key in ("revision", "head", "protocol", "queues", "tasks", "drift"):
            print(f"{key:9} {doc.get(key)}")
        rollout = doc.get("rollout")
        if rollout:
            left = rollout["rowsLeft"]
            eta = f", ETA {rollout['etaSeconds']:.0f}s" if rollout["etaSeconds"] else ""
            print(
                f"rollout   to {rollout['target']}, phase {rollout['phase']}: "
                f"{rollout['rowsDone']} rows migrated, {left['directives']} without directive "
                f"and {left['relocations']} in @auto left{eta}"
            )
    return 1 if doc["drift"] else 0


def _status_foreign(args: argparse.Namespace) -> int:
    """Where a database is in a set of another format: its revision by the format's own
    bookkeeping, the head, what is pending (read only)."""
    from queueguard.upgrade.plan.planner import current_revision

    mset = _foreign_set(args)
    at = current_revision(mset, _target(args, fallback=True))
    pending = [r.id for r in mset.pending(at)]
    doc = {
        "format": mset.format,
        "revision": at,
        "head": mset.head.id if mset.head else None,
        "pending": pending,
    }
    if args.json:
        _emit_json(doc)
    else:
        for key in ("format", "revision", "head"):
            print(f"{key:9} {doc[key]}")
        print(f"pending   {', '.join(pending) or 'none'}")
    return 0


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

    if _is_foreign(args):
        return _upgrade_foreign(args)
    migrations = _migrations(args)
    if args.sql:
        print(runner.render_sql(args.to, migrations=migrations))
        return 0
    if args.online or args.phase:
        return _upgrade_online(args, migrations)
    dsn = _target(args, fallback=False)
    report = runner.upgrade(
        dsn,
        to=args.to,
        lock_timeout_ms=parse_duration_ms(args.lock_timeout or "5s"),
        statement_timeout_ms=parse_duration_ms(args.statement_timeout or "60m"),
        retries=3 if args.retries is None else args.retries,
        force=args.force,
        progress=not args.json,
        migrations=migrations,
        pooled=args.pooled,
    )
    for warning in report.warnings:
        print(f"queueguard: warning: {warning}", file=sys.stderr)
    if args.json:
        _emit_json(report.as_json())
    elif not report.applied:
        print(f"already at {report.after} (nothing to do)")
        for revision in report.skipped:
            print(f"  revision {revision} was applied by another runner meanwhile")
    else:
        print(
            f"upgraded {report.before or 'empty'} -> {report.after} "
            f"(applied {', '.join(report.applied)}) in {report.elapsed_ms} ms"
        )
        for revision in report.skipped:
            print(f"  revision {revision} was applied by another runner meanwhile")
        for queue, rows in report.relocated.items():
            print(f"  relocated {rows} rows from {queue}")
        if report.queues_fenced:
            protocol = migrations.get(report.after or "").protocol
            print(f"  fenced {report.queues_fenced} queues; protocol is now {protocol}")
        print(f"  lock waits: {report.lock_waits}")
    return 0


def _is_foreign(args: argparse.Namespace) -> bool:
    """A --migrations set of another format than ours (or --format saying so)."""
    from queueguard import sets

    fmt = getattr(args, "format", None)
    if fmt is not None:
        return bool(fmt != "queueguard")
    folder = getattr(args, "migrations", None)
    return bool(folder) and sets.detect(Path(str(folder)).resolve()) != "queueguard"


def _upgrade_foreign(args: argparse.Namespace) -> int:
    from queueguard.errors import LockTooLong
    from queueguard.pg.targets import parse_duration_ms
    from queueguard.upgrade.foreign.runner import Limits, upgrade
    from queueguard.upgrade.plan.planner import plan
    from queueguard.upgrade.plan.report import render_over

    if args.sql or args.online or args.phase:
        raise UsageError("--sql and --online apply to queueguard's own migration set only")
    mset = _foreign_set(args)
    dsn = _target(args, fallback=False)
    limits = Limits(
        lock_timeout_ms=parse_duration_ms(args.lock_timeout or "5s"),
        statement_timeout_ms=parse_duration_ms(args.statement_timeout or "60m"),
        retries=3 if args.retries is None else args.retries,
    )
    if args.max_lock:
        bill = plan(
            mset,
            dsn,
            to=args.to,
            scratch_admin=args.scratch_dsn,
            max_lock_ms=parse_duration_ms(args.max_lock),
        )
        if bill.over and not args.force:
            raise LockTooLong(
                render_over(bill) + "\nnothing was changed; --force applies it anyway"
            )
    report = upgrade(mset, dsn, to=args.to, limits=limits)
    if args.json:
        _emit_json(report.as_json())
        return 0
    for note in report.notes:
        print(f"queueguard: note: {note}", file=sys.stderr)
    if not report.applied:
        print(f"already at {report.after or report.before} (nothing to do)")
    else:
        print(
            f"upgraded {report.before or 'empty'} -> {report.after} "
            f"(applied {', '.join(report.applied)}) in {report.elapsed_ms} ms"
        )
        if report.resumed:
            print(f"  resumed {', '.join(report.resumed)} where a previous run stopped")
        print(f"  lock waits: {report.lock_waits}")
    for revision in report.skipped:
        print(f"  revision {revision} was applied by another runner meanwhile")
    return 0


def _upgrade_online(args: argparse.Namespace, migrations: SetFacts) -> int:
    import signal
    import threading

    from queueguard.cli.progress import Reporter
    from queueguard.pg.targets import parse_duration_ms
    from queueguard.upgrade import online

    if args.sql or args.to != "head":
        raise UsageError("--online goes to head and cannot render SQL (--sql, --to)")
    max_lag = parse_duration_ms(args.max_lag) / 1000
    knobs = online.Knobs(
        batch_size=args.batch_size,
        pause_s=parse_duration_ms(args.pause) / 1000,
        lock_timeout_ms=parse_duration_ms(args.lock_timeout or "500ms"),
        retries=10 if args.retries is None else args.retries,
        statement_timeout_ms=parse_duration_ms(args.statement_timeout or "60s"),
        lease_s=parse_duration_ms(args.lease) / 1000,
        wait_s=parse_duration_ms(args.wait) / 1000,
        max_lag_s=max_lag or None,
    )
    dsn = _target(args, fallback=False)
    stop = threading.Event()

    def pause(_signum: int, _frame: object) -> None:
        if stop.is_set():
            raise KeyboardInterrupt  # a second Ctrl-C: stop now (the batch rolls back)
        print("\nqueueguard: pausing after the batch in flight commits", file=sys.stderr)
        stop.set()

    previous = signal.signal(signal.SIGINT, pause)
    reporter = Reporter(sys.stderr)
    try:
        report = online.run(
            dsn,
            phase=args.phase,
            knobs=knobs,
            force=args.force,
            pooled=args.pooled,
            tell=None if args.json else reporter,
            migrations=migrations,
            stop=stop,
        )
    finally:
        reporter.close()
        signal.signal(signal.SIGINT, previous)
    for warning in report.warnings:
        print(f"queueguard: warning: {warning}", file=sys.stderr)
    if args.json:
        _emit_json(report.as_json())
    else:
        done = ", ".join(report.phases) or "nothing (no phase was due)"
        print(f"online upgrade to {report.target}: {done}; now {report.phase}")
        print(f"  revision {report.before} -> {report.after} in {report.elapsed_ms} ms")
        print(
            f"  directives {report.directives}, relocated {report.rows_relocated} rows "
            f"from {len(report.relocated)} @auto queues, counters repaired "
            f"{report.counters_repaired}, queues fenced {report.queues_fenced}"
        )
        print(f"  batches {report.batches}, lock waits {report.lock_waits}")
        print(f"next: {report.next}")
    return 1 if report.paused else 0


# verify / fixtures / snapshot / rehearse ----------------------------------------------------
def cmd_verify(args: argparse.Namespace) -> int:
    from queueguard.pg import scratch
    from queueguard.upgrade import verify

    if _is_foreign(args):
        return _verify_foreign(args)
    if args.fresh or args.invariants:
        raise UsageError("--fresh and --invariants apply to another format's migration set")
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


def _verify_foreign(args: argparse.Namespace) -> int:
    from queueguard.pg import scratch
    from queueguard.upgrade.foreign import checks
    from queueguard.upgrade.foreign.verify import verify

    if args.fixture:
        raise UsageError("--fixture names a golden fixture of queueguard's own set")
    mset = _foreign_set(args)
    report = verify(
        mset,
        args.dsn or scratch.server_dsn(),
        fresh=Path(args.fresh) if args.fresh else None,
        fixtures=Path(args.fixtures) if args.fixtures else None,
        invariants=Path(args.invariants) if args.invariants else None,
        progress=None if args.json else lambda line: print(f"verify: {line}", file=sys.stderr),
    )
    if args.json:
        doc = report.document()
        doc.pop("schemaVersion")
        _emit_json(doc)
    else:
        print(checks.render_text(report))
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
    from queueguard.upgrade import snapshots

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


def cmd_rehearse(args: argparse.Namespace) -> int:
    from queueguard.upgrade.rehearse import rehearse

    if _is_foreign(args):
        from queueguard.upgrade.foreign import rehearse as foreign
        from queueguard.upgrade.foreign.checks import parse_invariants

        invariants = None
        if args.invariants:
            path = Path(args.invariants)
            if not path.is_file():
                raise UsageError(f"--invariants {path}: no such file")
            invariants = parse_invariants(path.read_text(encoding="utf-8"), str(path))
        done = foreign.rehearse(
            _foreign_set(args),
            _target(args, fallback=False),
            args.scratch_dsn,
            to=args.to,
            invariants=invariants,
        )
        if args.json:
            _emit_json(done.as_json())
        else:
            print(foreign.render_text(done))
        return 0 if done.ok else 1

    result = rehearse(_target(args, fallback=False), args.scratch_dsn, _migrations(args))
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


# plan --------------------------------------------------------------------------------
def _foreign_set(args: argparse.Namespace) -> Any:
    """The migration set of `--migrations DIR` in any format (`--format` or detected;
    default: the packaged set)."""
    from queueguard import sets
    from queueguard.resources import migrations_dir

    folder = getattr(args, "migrations", None)
    fmt = getattr(args, "format", None)
    if not folder:
        return sets.load(Path(str(migrations_dir())), fmt or "queueguard")
    return sets.load(Path(folder), fmt)


def cmd_plan(args: argparse.Namespace) -> int:
    from queueguard.pg.targets import parse_duration_ms
    from queueguard.upgrade.plan.planner import plan
    from queueguard.upgrade.plan.report import render_text

    if args.sample_rows < 1:
        raise UsageError(f"--sample-rows must be at least 1, got {args.sample_rows}")
    max_lock = parse_duration_ms(args.max_lock) if args.max_lock else None
    mset = _foreign_set(args)
    result = plan(
        mset,
        _target(args, fallback=False),
        to=args.to,
        scratch_admin=args.scratch_dsn,
        max_lock_ms=max_lock,
        sample_rows=args.sample_rows,
    )
    if args.json:
        doc = result.document()
        doc.pop("schemaVersion")
        _emit_json(doc)
    else:
        print(render_text(result))
    return 0 if not result.over else 1


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
        pooled=args.pooled,
    )
    if args.json:
        _emit_json(report.as_json())
    else:
        print(render_text(report, args.fail_on, color=wants_color(sys.stdout)))
    return report.exit_code(args.fail_on)


# lint --------------------------------------------------------------------------------
def cmd_lint(args: argparse.Namespace) -> int:
    from queueguard.lint import lint
    from queueguard.lint.foreign import detect_set, lint_set
    from queueguard.resources import audit_dir

    mset = None
    if args.migrations and args.format != "queueguard":
        mset = _foreign_set(args)
        mset = None if mset.format == "queueguard" else mset
    elif len(args.paths) == 1 and not args.format:
        mset = detect_set(Path(args.paths[0]))
    if mset is not None:
        foreign = lint_set(mset, dsn=_target(args, fallback=False) if args.dsn else None)
        if args.json:
            _emit_json(foreign.as_json())
        elif foreign.flagged:
            print(foreign.render_text())
        print(foreign.summary(), file=sys.stderr)
        return foreign.exit_code
    if args.dsn:
        raise UsageError("lint --dsn observes a foreign set: name it with --migrations DIR")
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


# mutate ------------------------------------------------------------------------------
def cmd_mutate(args: argparse.Namespace) -> int:
    from queueguard.mutate import runner, session
    from queueguard.pg import scratch
    from queueguard.pg.targets import parse_duration_ms

    plan = session.plan(
        _migrations(args),
        args.revision,
        operators=args.operator,
        only=args.mutant,
        equivalents_path=Path(args.equivalents) if args.equivalents else None,
        scope=args.scope,
    )
    if args.list:
        if args.json:
            _emit_json(plan.as_json())
        else:
            print(plan.render())
        return 0
    settings = runner.Settings(
        admin_dsn=args.dsn or scratch.server_dsn(),
        jobs=args.jobs,
        timeout_s=parse_duration_ms(args.timeout) / 1000,
        command=args.command,
        fixtures_root=Path(args.fixtures) if args.fixtures else None,
    )
    total = len(plan.selected)

    def progress(done: int, mutant: Any, outcome: Any) -> None:
        status = (
            "timeout"
            if outcome.timed_out
            else f"killed by {outcome.killed_by}"
            if outcome.killed_by
            else "SURVIVED"
        )
        print(
            f"mutate: [{done}/{total}] {status:18} {mutant.id} {mutant.operator} "
            f"{mutant.where} ({outcome.elapsed_ms / 1000:.1f}s)",
            file=sys.stderr,
            flush=True,
        )

    def baseline(line: str) -> None:
        print(f"mutate: {line}", file=sys.stderr, flush=True)

    report = session.execute(plan, settings, progress, baseline)
    if args.json:
        _emit_json(report.as_json())
    else:
        print(report.render())
    return report.exit_code
