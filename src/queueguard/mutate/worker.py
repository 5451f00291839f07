"""One job (a mutant, or a baseline) judged by the gates, in a worker process.

Workers are long-lived processes (`runner.Pool`), one per `--jobs`: `python -m
queueguard.mutate worker FD N`, a fresh interpreter that imports what the gates need (this
module imports them) and never the caller's `__main__`. Each leads its own session, so a job
that overruns its timeout is killed with every child it started (the user command included)
and the worker is replaced.
"""

from __future__ import annotations

import shutil
import time
import traceback
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from queueguard.mutate.gates import (
    GateResult,
    Release,
    command_gate,
    exact_verify_gate,
    lint_gate,
    verify_gate,
)
from queueguard.mutate.shared import Shared
from queueguard.mutate.sites import is_online
from queueguard.mutate.workspace import materialise
from queueguard.pg.scratch import ScratchDatabases

GATES = ("lint", "verify", "command")


@dataclass(frozen=True)
class Setup:
    """What every job of a run needs (sent once to each worker)."""

    shared: Shared
    #: the unmodified copy of the migration set that jobs copy
    baseline: Path
    #: where jobs make their copies
    jobs_folder: Path
    fixtures_root: Path | None = None
    command: str | None = None


@dataclass(frozen=True)
class Job:
    #: the mutant id, or `baseline` / `rendered`
    key: str
    #: files of the copy to replace (relative to the migration set)
    files: dict[str, str] = field(default_factory=dict)
    #: scratch databases of this job are named `<prefix>_…` (dropped if it is killed)
    prefix: str = "qgm"
    #: the complete `queueguard verify` instead of the fast one (the baseline)
    exact: bool = False
    #: run every gate even after one failed (baselines report everything)
    all_gates: bool = False

    @property
    def online_only(self) -> bool:
        """Only files of a revision's online path change (`sql/<rev>/online/`)."""
        return bool(self.files) and all(is_online(path) for path in self.files)


@dataclass(frozen=True)
class Outcome:
    key: str
    gates: tuple[GateResult, ...] = ()
    elapsed_ms: int = 0
    timed_out: bool = False
    #: a failure of the harness itself (not of a gate): the run has no verdict
    error: str | None = None

    @property
    def killed_by(self) -> str | None:
        return next((g.name for g in self.gates if not g.ok), None)

    def as_json(self) -> dict[str, Any]:
        return {
            "elapsedMs": self.elapsed_ms,
            "timedOut": self.timed_out,
            "gates": [g.as_json() for g in self.gates],
        }


def run_job(setup: Setup, job: Job, release: Release = ScratchDatabases.drop_all) -> Outcome:
    """Copy, write the mutated files, regenerate the manifest, run the gates, clean up."""
    from queueguard import revisions

    started = time.monotonic()
    root = setup.jobs_folder / job.key
    try:
        materialise(setup.baseline, root, job.files)
        migrations = revisions.load(root)
        gates: list[GateResult] = []
        for gate in GATES:
            if gate == "lint" and job.online_only:
                continue  # lint reads the step files, not the online path: the baseline's verdict
            if gate == "lint":
                result = lint_gate(root)
            elif gate == "verify" and job.exact:
                result = exact_verify_gate(setup.shared.admin_dsn, migrations, setup.fixtures_root)
            elif gate == "verify":
                result = verify_gate(
                    setup.shared,
                    migrations,
                    setup.fixtures_root,
                    job.prefix,
                    release,
                    online_only=job.online_only,
                )
            elif setup.command:
                result = command_gate(setup.command, root)
            else:
                continue
            gates.append(result)
            if not result.ok and not job.all_gates:
                break
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return Outcome(job.key, tuple(gates), int((time.monotonic() - started) * 1000))


def serve(conn: Connection, number: int) -> None:
    """The worker loop: receive the Setup, then a Job at a time, send back its Outcome, until
    None arrives. Output goes wherever the parent pointed stdout/stderr (its log folder)."""
    setup: Setup = conn.recv()
    conn.send("ready")
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="drop") as dropper:
        dropping: list[Future[None]] = []

        def release(scratch: ScratchDatabases) -> None:
            """Drop a job's databases while the next job runs; wait for the previous job's
            first, so at most one job's databases are ever waiting to be dropped."""
            wait(dropping)
            dropping[:] = [dropper.submit(scratch.drop_all)]

        while True:
            job = conn.recv()
            if job is None:
                return
            try:
                outcome = run_job(setup, job, release)
            except Exception:
                outcome = Outcome(job.key, error=traceback.format_exc())
            conn.send(outcome)


def main(argv: list[str]) -> None:
    """`python -m queueguard.mutate worker FD NUMBER`: serve the connection on socket FD."""
    fd, number = int(argv[0]), int(argv[1])
    serve(Connection(fd), number)
