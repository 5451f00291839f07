"""`queueguard fleet`: one migration set across many databases and tenant schemas (upgrade,
status, verify, matrix)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from queueguard.cli.common import _django_options, _emit, _output
from queueguard.errors import UsageError


def cmd_fleet(args: argparse.Namespace) -> int:
    handlers = {
        "plan": _plan,
        "upgrade": _upgrade,
        "status": _status,
        "verify": _verify,
        "matrix": _matrix,
    }
    _django_options(args)  # a Django project's interpreter, settings and alias
    return handlers[args.fleet_command](args)


def _show(
    output: str,
    doc: dict[str, Any],
    text: Callable[[dict[str, Any]], str],
    markdown: Callable[[dict[str, Any]], str],
) -> None:
    """A fleet document as `--output` asks: JSON, the Markdown rendering, or the text."""
    if output == "markdown":
        print(markdown(doc), end="")
    else:
        _emit(output, "fleet", doc, lambda: text(doc))


def _seconds(text: str, flag: str) -> float:
    from queueguard.pg.targets import parse_duration_ms

    ms = parse_duration_ms(text)
    if ms <= 0:
        raise UsageError(f"{flag} takes a duration above zero, got {text!r}")
    return ms / 1000


def _upgrade(args: argparse.Namespace) -> int:
    from queueguard.engine.apply.session import Limits
    from queueguard.fleet import board, control, live
    from queueguard.fleet.resolved import resolve
    from queueguard.fleet.run import Options
    from queueguard.fleet.upgrade import upgrade
    from queueguard.pg.targets import parse_duration_ms

    output = _output(args)
    fleet = resolve(Path(args.targets), args.migrations, args.format, args.parallel)
    default = Limits()
    online = None
    if args.online:
        from queueguard.engine.online.upgrade import DEFAULT_BUDGET_MS, ONLINE_LIMITS
        from queueguard.fleet.online import Online
        from queueguard.fleet.resolved import refuse_online

        refuse_online(fleet)
        default = ONLINE_LIMITS  # its own defaults, as upgrade --online's
        lag = parse_duration_ms(args.max_lag) / 1000
        online = Online(
            fleet.mset, args.to,
            parse_duration_ms(args.max_lock) if args.max_lock else DEFAULT_BUDGET_MS,
            force=args.force,
            options={"batch_size": args.batch_size, "pause_s": parse_duration_ms(args.pause) / 1000,
                     "max_lag_s": lag or None},
            scratch_admin=args.scratch_dsn,
            tell=lambda line: print(f"fleet: {line}", file=sys.stderr),
        )  # fmt: skip
    limits = Limits(
        lock_timeout_ms=(
            parse_duration_ms(args.lock_timeout) if args.lock_timeout else default.lock_timeout_ms
        ),
        statement_timeout_ms=parse_duration_ms(args.statement_timeout or "60m"),
        retries=default.retries if args.retries is None else args.retries,
    )
    options = Options(
        to=args.to,
        limits=limits,
        claim_ttl_s=_seconds(args.claim_ttl, "--claim-ttl"),
        stop_grace_s=_seconds(args.stop_grace, "--stop-grace"),
        max_lock_ms=parse_duration_ms(args.max_lock) if args.max_lock else None,
        scratch_admin=args.scratch_dsn,
        online=online,
    )
    ctl = control.open_control(control.resolve_dsn(args.control))
    try:
        run, rows, extra, code = upgrade(
            fleet, ctl, options, run=args.run,
            events=Path(args.events) if args.events else None,
            metrics=Path(args.metrics) if args.metrics else None, live=live.available(),
        )  # fmt: skip
    finally:
        ctl.close()
    doc = board.document(run, rows, extra, fleet.mset)
    for name in extra:
        print(f"fleet: {name}: not in this run (found after its manifest was frozen)",
              file=sys.stderr)  # fmt: skip
    for t in doc["targets"]:
        if t["state"] == "failed":
            print(f"fleet: failed: {t['name']}: {t['error']}", file=sys.stderr)
    _show(output, doc, board.text, board.markdown)
    return code


def _plan(args: argparse.Namespace) -> int:
    from queueguard.fleet import plan
    from queueguard.fleet.resolved import resolve
    from queueguard.pg.targets import parse_duration_ms

    output = _output(args)
    fleet = resolve(Path(args.targets), args.migrations, args.format)
    max_lock = parse_duration_ms(args.max_lock) if args.max_lock else None
    doc = plan.plan(fleet, args.to, max_lock, args.scratch_dsn, args.sample_rows)
    _show(output, doc, plan.text, plan.markdown)
    return 0 if doc["ok"] else 1


def _status(args: argparse.Namespace) -> int:
    from queueguard.fleet import board, control
    from queueguard.fleet.resolved import resolve

    output = _output(args)
    fleet = resolve(Path(args.targets), args.migrations, args.format)
    ctl = control.open_control(control.resolve_dsn(args.control))
    try:
        if args.run:
            try:
                run = int(args.run)
            except ValueError:
                raise UsageError(f"--run takes a run id, got {args.run!r}") from None
            ctl.by_id(run)
        else:
            from queueguard.fleet.upgrade import run_set

            the_set = run_set(fleet.mset, args.to)
            found = ctl.find(control.identity(fleet.file, the_set), unfinished=False)
            if found is None:
                raise UsageError(f"no fleet run of {args.targets} in the control database")
            run = found[0]
        rows = ctl.board(run)
    finally:
        ctl.close()
    doc = board.document(run, rows, mset=fleet.mset)
    _show(output, doc, board.text, board.markdown)
    return 0 if doc["done"] else 1


def _verify(args: argparse.Namespace) -> int:
    from queueguard.fleet import verify
    from queueguard.fleet.resolved import resolve

    output = _output(args)
    fleet = resolve(Path(args.targets), args.migrations, args.format)
    fresh = Path(args.fresh) if args.fresh else None
    doc = verify.verify(fleet, fresh)
    _show(output, doc, verify.text, verify.markdown)
    return 0 if doc["ok"] else 1


def _matrix(args: argparse.Namespace) -> int:
    import json

    from queueguard.fleet import matrix

    print(json.dumps(matrix.render(args.shards, args.engine), indent=2))
    return 0
