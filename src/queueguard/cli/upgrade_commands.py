"""The commands that migrate a database, and the audit before: upgrade (queueguard's own
set, a set of another format, --online) and preflight.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from queueguard.cli.common import (
    _emit_json,
    _is_other_format,
    _migration_set,
    _migrations,
    _placed_to,
    _target,
    upgrade_summary,
)
from queueguard.errors import UsageError
from queueguard.style import wants_color

if TYPE_CHECKING:
    from queueguard.revisions import SetFacts


# upgrade -----------------------------------------------------------------------------
def cmd_upgrade(args: argparse.Namespace) -> int:
    if _is_other_format(args):
        return _upgrade_set(args)
    from queueguard.pg.targets import parse_duration_ms
    from queueguard.queue_schema import runner

    migrations = _migrations(args)
    args.to = args.to or "head"  # queueguard's own set: one line
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


def _upgrade_set(args: argparse.Namespace) -> int:
    from queueguard.engine.apply.runner import upgrade
    from queueguard.engine.apply.session import Limits
    from queueguard.errors import LockTooLong
    from queueguard.pg.targets import parse_duration_ms

    if args.sql:
        raise UsageError("--sql applies to queueguard's own migration set only")
    if args.phase and not args.online:
        raise UsageError("--phase goes with --online")
    mset = _migration_set(args)
    dsn = _target(args, fallback=False)
    args.to = _placed_to(args, mset, dsn)
    default = Limits()
    if args.online:  # its own defaults: see ONLINE_LIMITS
        from queueguard.engine.online.upgrade import ONLINE_LIMITS as default
    limits = Limits(
        lock_timeout_ms=(
            parse_duration_ms(args.lock_timeout) if args.lock_timeout else default.lock_timeout_ms
        ),
        statement_timeout_ms=parse_duration_ms(args.statement_timeout or "60m"),
        retries=default.retries if args.retries is None else args.retries,
    )
    if args.online:
        from queueguard.cli import online_set_commands

        return online_set_commands.upgrade_online(args, mset, dsn, limits)
    if args.max_lock:  # plan (and PostgreSQL's parser) only when asked for
        from queueguard.engine.plan.planner import plan
        from queueguard.engine.plan.report import render_over

        bill = plan(
            mset,
            dsn,
            to=args.to,
            scratch_admin=args.scratch_dsn,
            max_lock_ms=parse_duration_ms(args.max_lock),
            sample_rows=args.sample_rows,
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
    for line in upgrade_summary(report):
        print(line)
    for revision in report.skipped:
        print(f"  revision {revision} was applied by another runner meanwhile")
    return 0


def _upgrade_online(args: argparse.Namespace, migrations: SetFacts) -> int:
    import signal
    import threading

    from queueguard.cli.progress import Reporter
    from queueguard.pg.targets import parse_duration_ms
    from queueguard.queue_schema import online

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


# preflight ---------------------------------------------------------------------------
def cmd_preflight(args: argparse.Namespace) -> int:
    from queueguard.pg.targets import parse_duration_ms
    from queueguard.queue_schema.preflight import preflight, render_text

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
