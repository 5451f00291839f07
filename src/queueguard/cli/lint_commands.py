"""The commands that judge the migration set itself: lint, manifest and mutate."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from queueguard.cli.common import (
    _document,
    _emit,
    _emit_json,
    _migration_set,
    _migrations,
    _output,
    _target,
)
from queueguard.errors import UsageError
from queueguard.report.units import duration_ms


# lint --------------------------------------------------------------------------------
def cmd_lint(args: argparse.Namespace) -> int:
    output = _output(args)
    reports = _lint_reports(args)
    if output in ("json", "markdown") and len(reports) != 1:
        raise UsageError(
            f"--output {output} prints one document: these paths belong to {len(reports)} "
            "migration sets (lint each set on its own, or use --output text, github or sarif)"
        )
    if output == "github":
        from queueguard.lint import github

        prefix, root = _repository()
        lines = [github.render(_document(r.as_json()), prefix, root) for r in reports]
        text = "\n".join(line for line in lines if line)
        if text:
            print(text)
    elif output == "sarif":
        from queueguard import __version__
        from queueguard.lint import sarif

        prefix, root = _repository()
        docs = [_document(r.as_json()) for r in reports]
        print(json.dumps(sarif.render(docs, __version__, prefix, root), indent=2))
    else:
        for report in reports:
            _emit(output, "lint", report.as_json(), report.render_text)
    for report in reports:
        print(report.summary(), file=sys.stderr)
    return max(int(report.exit_code) for report in reports)


def _lint_reports(args: argparse.Namespace) -> list[Any]:
    """The lint runs the arguments ask for: a whole set of another format (`--migrations`, or
    one directory that is one), the gate over queueguard's set and loose files, and for each
    file of another format's set, that set (the file's statements alone)."""
    from queueguard.lint import Report, lint
    from queueguard.lint.sets import detect_set, lint_set, set_of_file
    from queueguard.resources import audit_dir

    dsn = _target(args, fallback=False) if args.dsn else None
    if args.migrations and args.format != "queueguard":
        mset = _migration_set(args)
        if mset.format != "queueguard":
            return [lint_set(mset, dsn=dsn)]
    elif len(args.paths) == 1 and not args.format:
        mset = detect_set(Path(args.paths[0]))
        if mset is not None:
            return [lint_set(mset, dsn=dsn)]
    gate: list[Path] = []
    groups: dict[Path, tuple[Any, list[Path]]] = {}
    for given in map(Path, args.paths):
        found = set_of_file(given) if given.is_file() and not args.format else None
        if found is not None:
            groups.setdefault(found.root, (found, []))[1].append(given)
        elif given.suffix == ".py" and given.is_file():
            # Python is never SQL: a .py file is linted only as a revision of an Alembic set
            print(f"lint: {given}: not a revision of a migration set; skipped", file=sys.stderr)
        else:
            gate.append(given)
    if dsn is not None and not groups:
        raise UsageError(
            "lint --dsn observes a set of another format: name it with --migrations DIR"
        )
    reports: list[Any] = [lint_set(m, dsn=dsn, only=files) for m, files in groups.values()]
    if gate or not args.paths:
        paths = gate or (
            [Path(args.migrations), Path(str(audit_dir()))] if args.migrations else None
        )
        reports.insert(0, lint(paths))
    if not reports:  # every path was a Python file outside any set: nothing to lint
        reports.append(Report(findings=()))
    return reports


def _repository() -> tuple[str, str]:
    """The working directory relative to the repository's root (the nearest folder above
    holding `.git`; the working directory itself outside a repository), and that root:
    annotations and SARIF name files from there."""
    cwd = Path.cwd().resolve()
    root = next((p for p in (cwd, *cwd.parents) if (p / ".git").exists()), cwd)
    prefix = cwd.relative_to(root).as_posix()
    return ("" if prefix == "." else prefix), root.as_posix()


# manifest ----------------------------------------------------------------------------
def cmd_manifest(args: argparse.Namespace) -> int:
    from queueguard.queue_schema import manifest

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
            f"{mutant.where} ({duration_ms(outcome.elapsed_ms)})",
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
