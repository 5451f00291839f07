"""`upgrade --migrations DIR --online` for a set of another format: the over-budget
statements in online forms, proven on a scratch copy first; `--phase abort` undoes the
statement in flight."""

from __future__ import annotations

import argparse
import time
from typing import Any

from queueguard.cli.common import _emit_json
from queueguard.engine.apply.session import Limits
from queueguard.errors import UsageError
from queueguard.sets import MigrationSet


def _ms(value: float) -> str:
    return f"{value / 1000:.1f} s" if value >= 1000 else f"{value:.0f} ms"


class _RebuildProgress:
    """The rebuild's phases as the online path's progress events (rows, rate, ETA)."""

    def __init__(self, reporter: Any) -> None:
        self.reporter = reporter
        self.phase: str | None = None
        self.started = time.monotonic()

    def __call__(self, phase: str, done: int, total: int | None) -> None:
        from queueguard.queue_schema.online.report import Progress

        if phase != self.phase:
            self.phase, self.started = phase, time.monotonic()
        elapsed = time.monotonic() - self.started
        # a rate from the first batch alone says nothing (a batch over a phase just begun)
        rate = done / elapsed if elapsed >= 1.0 and done else None
        self.reporter(Progress("rebuild", phase, done, total, rate))


def upgrade_online(args: argparse.Namespace, mset: MigrationSet, dsn: str, limits: Limits) -> int:
    from queueguard.cli.progress import Reporter
    from queueguard.engine.online import abort
    from queueguard.engine.online.upgrade import DEFAULT_BUDGET_MS, as_resumed
    from queueguard.engine.online.upgrade import upgrade_online as run
    from queueguard.pg.targets import parse_duration_ms

    if args.phase not in (None, "abort"):
        raise UsageError(
            f"--phase {args.phase} is a phase of queueguard's own online path; a set of "
            "another format takes only --phase abort"
        )
    reporter = Reporter()
    if args.phase == "abort":
        done = abort.abort(as_resumed(mset, dsn), dsn, limits, tell=reporter)
        if args.json:
            _emit_json({"schemaVersion": 1, **done.__dict__})
        elif done.revision is None:
            print("nothing in flight: no online statement to abort")
        else:
            print(f"aborted statement {(done.statement or 0) + 1} of revision {done.revision}")
            for line in done.undone or ["nothing of it had been built yet"]:
                print(f"  {line}")
            for sql in done.kept:
                print(f"  kept (committed before it): {' '.join(sql.split())[:100]}")
        return 0
    budget = parse_duration_ms(args.max_lock) if args.max_lock else DEFAULT_BUDGET_MS
    lag = parse_duration_ms(args.max_lag) / 1000 if args.max_lag else 0.0
    options: dict[str, Any] = {
        "on_progress": _RebuildProgress(reporter),
        "batch_size": args.batch_size,
        "pause_s": parse_duration_ms(args.pause) / 1000,
        "max_lag_s": lag or None,
    }
    result = run(
        mset,
        dsn,
        to=args.to,
        limits=limits,
        budget_ms=budget,
        force=args.force,
        options=options,
        scratch_admin=args.scratch_dsn,
        sample_rows=args.sample_rows,
        tell=reporter,
    )
    reporter.close()
    report = result.report
    assert report is not None
    online = [
        {
            "revision": d.revision,
            "statement": d.index + 1,
            "estimate_ms": round(d.line.estimate_ms, 1),
            "forms": [f.kind for f in d.forms] if d.forms else None,
            "refusal": d.refusal,
        }
        for d in result.decisions
    ]
    if args.json:
        _emit_json(
            {"schemaVersion": 1, **report.as_json(), "online": online, "proved": result.proved}
        )
        return 0
    for d in result.decisions:
        how = ", ".join(f.kind for f in d.forms) if d.forms else "plain (--force)"
        print(
            f"revision {d.revision} statement {d.index + 1}: {how} "
            f"(plain would hold its lock ~{_ms(d.line.estimate_ms)})"
        )
    if result.proved:
        print("proof: the online forms end where the plain statements end (schema dump, rows)")
    from queueguard.cli.common import upgrade_summary

    for line in upgrade_summary(report):
        print(line)
    return 0
