"""`fleet upgrade` from a resolved targets file (`fleet.resolved`) to the run's end: the
run joined (or started, its manifest frozen) in the control database, priced first with
--max-lock, and worked by this runner (`fleet.run`)."""

from __future__ import annotations

import contextlib
import hashlib
from pathlib import Path
from typing import Any

from queueguard.errors import UsageError
from queueguard.fleet import apply, control
from queueguard.fleet.events import Events
from queueguard.fleet.resolved import Fleet
from queueguard.fleet.run import Options, Runner, exit_code
from queueguard.sets import MigrationSet


def run_set(mset: MigrationSet, to: str | None) -> control.RunSet:
    head = mset.resolve(None)  # an Alembic set at several heads: all of them (`a,b`)
    return control.RunSet(mset.format, head, set_checksum(mset), mset.resolve(to))


def set_checksum(mset: MigrationSet) -> str:
    text = "\n".join(f"{r.id}:{r.checksum}" for r in mset.revisions)
    return hashlib.sha256(f"{mset.format}\n{text}".encode()).hexdigest()


def join(ctl: control.Control, fleet: Fleet, to: str | None, run: str | None) -> tuple[int, bool]:
    """The run this runner works: `run` = an id to join, "new" to start another, None the
    newest unfinished run of this identity (else a new one). (run id, whether it is new)."""
    mset = fleet.mset
    the_set = run_set(mset, to)
    ident = control.identity(fleet.file, the_set)
    alone = apply.database_alone(mset)
    exclusive = {t.name: t.schema is not None and alone for t in fleet.targets}
    if run is not None and run != "new":
        try:
            run_id = int(run)
        except ValueError:
            raise UsageError(f"--run takes a run id or new, got {run!r}") from None
        _same_set(ctl.by_id(run_id), the_set, run_id)
        return run_id, False
    if run is None:
        found = ctl.find(ident)
        if found is not None:
            _same_set(found[1], the_set, found[0])
            ctl.retry_failed(found[0])
            return found[0], False
    members, waves = fleet.members, fleet.file.waves
    made, theirs, new = ctl.create(ident, the_set, waves, members, exclusive, new=run == "new")
    _same_set(theirs, the_set, made)  # a run another runner made at the same moment
    return made, new


def budget(fleet: Fleet, options: Options) -> dict[str, tuple[float | None, str | None]]:
    """fleet plan's figures for each target: its predicted time, and the refusal its claim
    meets — a statement over --max-lock (as `upgrade --max-lock` refuses one database), or
    no bill at all (a target that could not be priced cannot be held to the budget)."""
    from queueguard.fleet import plan

    limit = options.max_lock_ms
    assert limit is not None
    doc = plan.plan(fleet, options.to, limit, options.scratch_admin)
    figures: dict[str, tuple[float | None, str | None]] = {}
    for t in doc["targets"]:
        refusal = None
        if t["error"]:
            refusal = f"not priced, so not held to --max-lock: {t['error']}"
        elif t["over"]:
            first = t["over"][0]
            refusal = (
                f"{len(t['over'])} statement(s) hold a blocking lock over --max-lock "
                f"{limit:.0f} ms at this target's size (first: revision {first['revision']}, "
                f"{first['heldMs']:.0f} ms: {first['sql'][:80]}); nothing was run"
            )
        figures[t["name"]] = (t.get("estimateMs"), refusal)
    return figures


def _same_set(theirs: control.RunSet, mine: control.RunSet, run: int) -> None:
    if theirs != mine:
        raise UsageError(
            f"run {run} applies {theirs.format} at {theirs.head} (checksum "
            f"{theirs.checksum[:12]}, to {theirs.target_revision}); this runner's set is "
            f"{mine.format} at {mine.head} (checksum {mine.checksum[:12]}, to "
            f"{mine.target_revision}): it does not join (--run new starts another run)"
        )


def upgrade(
    fleet: Fleet,
    ctl: control.Control,
    options: Options,
    *,
    run: str | None = None,
    events: Path | None = None,
    metrics: Path | None = None,
    live: bool = False,
) -> tuple[int, list[tuple[Any, ...]], list[str], int]:
    """This runner's part of the run: (run id, the board at its end, targets not in the
    run, exit code). `live`: the board redrawn on the terminal (stderr) as it goes."""
    run_id, new = join(ctl, fleet, options.to, run)
    if new and options.max_lock_ms is not None and options.online is None:
        ctl.predict(run_id, budget(fleet, options))
    extra = ctl.not_in_run(run_id, fleet.targets)
    runner_id = control.runner_id()
    reader = ctl.twin()
    with contextlib.ExitStack() as stack:
        stack.callback(reader.close)
        lines = None
        if live:
            from queueguard.fleet.live import LiveBoard

            drawer = ctl.twin()
            stack.callback(drawer.close)
            board = LiveBoard(run_id, lambda: drawer.board(run_id), fleet.mset)
            lines = stack.enter_context(board).line
        sink = Events(events, metrics, lambda: reader.board(run_id), lines)
        runner = Runner(
            ctl, run_id, runner_id, fleet.mset,
            {t.name: t for t in fleet.targets}, ctl.waves(run_id), options, sink,
        )  # fmt: skip
        runner.go()
        sink.write_metrics()
        rows = ctl.board(run_id)
    return run_id, rows, extra, exit_code(rows)
