"""The commands that judge the migration set itself: lint, manifest and mutate."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from queueguard.cli.common import _emit_json, _foreign_set, _migrations, _target
from queueguard.errors import UsageError


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
