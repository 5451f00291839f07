"""The commands that try the upgrade before it runs for real, on scratch databases or a
copy of the target: verify (the golden fixtures), rehearse and plan (the downtime bill).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from queueguard.cli.common import (
    _emit,
    _is_other_format,
    _migration_set,
    _migrations,
    _output,
    _placed_to,
    _target,
)
from queueguard.errors import UsageError
from queueguard.style import wants_color


# verify / rehearse -------------------------------------------------------------------
def cmd_verify(args: argparse.Namespace) -> int:
    from queueguard.pg import scratch
    from queueguard.queue_schema import verify

    output = _output(args)
    if _is_other_format(args):
        return _verify_set(args, output)
    if args.fresh or args.invariants or args.base:
        raise UsageError("--fresh, --base and --invariants apply to another format's migration set")
    admin = args.dsn or scratch.server_dsn()

    def progress(line: str) -> None:
        print(f"verify: {line}", file=sys.stderr, flush=True)

    report = verify.verify(
        admin,
        args.fixture or None,
        progress=None if output == "json" else progress,
        migrations=_migrations(args),
        fixtures_root=Path(args.fixtures) if args.fixtures else None,
    )
    doc = report.as_json()
    doc.pop("schemaVersion")
    _emit(output, "verify", doc, lambda: verify.render(report, color=wants_color(sys.stdout)))
    return 0 if report.ok else 1


def _verify_set(args: argparse.Namespace, output: str) -> int:
    from queueguard.engine.verify import report as checks
    from queueguard.engine.verify.checks import verify
    from queueguard.pg import scratch

    if args.fixture:
        raise UsageError("--fixture names a golden fixture of queueguard's own set")
    mset = _migration_set(args)
    report = verify(
        mset,
        args.dsn or scratch.server_dsn(),
        fresh=Path(args.fresh) if args.fresh else None,
        base=Path(args.base) if args.base else None,
        fixtures=Path(args.fixtures) if args.fixtures else None,
        invariants=Path(args.invariants) if args.invariants else None,
        progress=None
        if output == "json"
        else lambda line: print(f"verify: {line}", file=sys.stderr),
    )
    doc = report.document()
    doc.pop("schemaVersion")
    _emit(output, "verify", doc, lambda: checks.render_text(report))
    return 0 if report.ok else 1


def cmd_rehearse(args: argparse.Namespace) -> int:
    from queueguard.queue_schema.rehearse import of_own_set, render_text

    output = _output(args)
    if _is_other_format(args):
        from queueguard.engine.rehearse import rehearsal as set_rehearsal
        from queueguard.engine.verify.report import parse_invariants

        invariants = None
        if args.invariants:
            path = Path(args.invariants)
            if not path.is_file():
                raise UsageError(f"--invariants {path}: no such file")
            invariants = parse_invariants(path.read_text(encoding="utf-8"), str(path))
        rehearsed = _migration_set(args)
        source = _target(args, fallback=False)
        done = set_rehearsal.of_set(
            rehearsed,
            source,
            args.scratch_dsn,
            to=_placed_to(args, rehearsed, source),
            invariants=invariants,
        )
        _emit(output, "rehearse", done.as_json(), lambda: set_rehearsal.render_text(done))
        return 0 if done.ok else 1

    result = of_own_set(_target(args, fallback=False), args.scratch_dsn, _migrations(args))
    doc = result.as_json()
    doc.pop("schemaVersion")
    _emit(output, "rehearse", doc, lambda: render_text(result))
    return 0 if result.ok else 1


# plan --------------------------------------------------------------------------------
def cmd_plan(args: argparse.Namespace) -> int:
    from queueguard.engine.plan.planner import plan, sample_ahead
    from queueguard.engine.plan.report import render_text
    from queueguard.pg.targets import parse_duration_ms

    output = _output(args)
    if args.sample_rows < 1:
        raise UsageError(f"--sample-rows must be at least 1, got {args.sample_rows}")
    max_lock = parse_duration_ms(args.max_lock) if args.max_lock else None
    target = _target(args, fallback=False)
    # the scratch database made and the target's schema dumped while the set is read
    with sample_ahead(target, scratch_admin=args.scratch_dsn) as ahead:
        mset = _migration_set(args)
        result = plan(
            mset,
            target,
            to=_placed_to(args, mset, target),
            scratch_admin=args.scratch_dsn,
            max_lock_ms=max_lock,
            sample_rows=args.sample_rows,
            ahead=ahead,
        )
    online = _online_bill(args, mset, result) if args.online else None
    doc = result.document()
    doc.pop("schemaVersion")
    if online is not None:
        doc["online"] = online[0]

    def text() -> str:
        return render_text(result) + (f"\n{online[1]}" if online is not None else "")

    _emit(output, "plan", doc, text)
    if online is not None:  # the bill is paid online: only a statement without a form fails
        return 1 if any(r["refusal"] for r in online[0]) else 0
    return 0 if not result.over else 1


def _online_bill(args: argparse.Namespace, mset: Any, result: Any) -> tuple[list[Any], str]:
    """`plan --online`: the statements over the budget, their forms, locks, disk, time."""
    from queueguard.engine.online import bill, choose
    from queueguard.engine.online.upgrade import DEFAULT_BUDGET_MS, decisions_of
    from queueguard.engine.plan import sample
    from queueguard.pg.targets import parse_duration_ms

    budget = parse_duration_ms(args.max_lock) if args.max_lock else DEFAULT_BUDGET_MS
    dsn = _target(args, fallback=False)
    decisions = decisions_of(mset, dsn, result, budget)
    with sample.read_only(dsn) as conn:
        sizes = sample.sizes(conn)
    rebuilds = any(f.kind == choose.REBUILD for d in decisions for f in d.forms or ())
    # the writers' rate, for a rebuild's change log (only read; only when one rebuilds)
    rates = sample.write_rates(dsn, bill.WRITE_WINDOW_S) if rebuilds else {}
    rows = [bill.row(d, sizes, rates) for d in decisions]
    return rows, bill.render(rows, budget)
