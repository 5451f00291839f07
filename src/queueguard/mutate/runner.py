"""Running the gates over a revision's mutants: baselines first, then every mutant in parallel
worker processes, each under a timeout.

Two baselines must pass every gate before any mutant is judged, or the run stops
(`BaselineFailed`): the unmodified copy under the complete `queueguard verify` (so a mutant is
only ever compared with a set the gates accept), and the copy with every statement the
operators rewrite re-rendered by sqlglot unchanged (so a mutant is killed by its change, not
by sqlglot's rendering). A job that overruns `timeout_s` is killed with its process group;
its scratch databases (named `<job prefix>_…`) and folder are removed.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from pathlib import Path

from queueguard.mutate.errors import BaselineFailed, MutationRunFailed
from queueguard.mutate.generate import rendered_files
from queueguard.mutate.model import Mutant
from queueguard.mutate.shared import prepare
from queueguard.mutate.sites import revision_sites
from queueguard.mutate.worker import Job, Outcome, Setup
from queueguard.mutate.workspace import Workspace
from queueguard.pg.connect import connection
from queueguard.pg.scratch import ScratchDatabases, drop_database
from queueguard.revisions import SetFacts

DEFAULT_TIMEOUT_S = 120.0
#: Baselines run the complete verify; they get at least this long.
BASELINE_TIMEOUT_S = 600.0
_START_TIMEOUT_S = 120.0

Done = Callable[[Job, Outcome], None]


@dataclass(frozen=True)
class Settings:
    admin_dsn: str
    jobs: int = 1
    timeout_s: float = DEFAULT_TIMEOUT_S
    command: str | None = None
    fixtures_root: Path | None = None


@dataclass(frozen=True)
class RunResult:
    #: one outcome per mutant, in the mutants' order
    outcomes: tuple[Outcome, ...]
    #: the two baselines (unmodified, rendered)
    baselines: tuple[Outcome, ...]
    #: wall-clock time of the mutants (baselines and set-up excluded)
    elapsed_ms: int
    #: wall-clock time of the whole run
    total_ms: int
    jobs: int


def drop_prefixed(admin_dsn: str, prefix: str) -> None:
    """Drop every scratch database named `<prefix>…` (a killed job's, or a run's leftovers)."""
    with connection(admin_dsn, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT datname FROM pg_database WHERE left(datname, length(%s)) = %s",
            (prefix, prefix),
        ).fetchall()
    for (name,) in rows:
        drop_database(admin_dsn, name)


@dataclass
class _Worker:
    process: subprocess.Popen[bytes]
    conn: Connection


class Pool:
    """`size` worker processes running jobs, each job under a deadline."""

    def __init__(
        self, setup: Setup, size: int, cleanup: Callable[[Job], None], log_folder: Path
    ) -> None:
        self.setup = setup
        self.cleanup = cleanup
        self.log_folder = log_folder
        self._started = 0
        self.workers = [self._start() for _ in range(max(1, size))]
        for worker in self.workers:
            self._await_ready(worker)

    def _start(self) -> _Worker:
        """A fresh interpreter in its own session, sharing our import path; it gets the Setup
        first, then jobs, over a socket."""
        ours, theirs = socket.socketpair()
        self._started += 1
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
        command = [sys.executable, "-m", "queueguard.mutate", "worker"]
        with open(self.log_folder / f"worker-{self._started}.log", "ab") as log:
            process = subprocess.Popen(
                [*command, str(theirs.fileno()), str(self._started)],
                pass_fds=(theirs.fileno(),),
                start_new_session=True,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                env=env,
            )
        theirs.close()
        conn = Connection(ours.detach())
        conn.send(self.setup)
        return _Worker(process, conn)

    def _await_ready(self, worker: _Worker) -> None:
        try:
            ready = worker.conn.poll(_START_TIMEOUT_S) and worker.conn.recv() == "ready"
        except (EOFError, OSError):
            ready = False
        if not ready:
            self._kill(worker)
            logs = sorted(self.log_folder.glob("worker-*.log"))
            tail = logs[-1].read_text(errors="replace")[-2000:] if logs else ""
            raise MutationRunFailed(f"a mutation worker did not start:\n{tail}")

    def _kill(self, worker: _Worker) -> None:
        """The worker and every process it started (its session's group)."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(worker.process.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            worker.process.wait(10)
        worker.conn.close()

    def _replace(self, index: int) -> None:
        self._kill(self.workers[index])
        self.workers[index] = self._start()
        self._await_ready(self.workers[index])

    def run(self, jobs: Sequence[Job], timeout_s: float, done: Done) -> None:
        """Run `jobs`; `done(job, outcome)` as each finishes (in completion order)."""
        queue = deque(jobs)
        busy: dict[int, tuple[Job, float, float]] = {}
        while queue or busy:
            for i, worker in enumerate(self.workers):
                if i not in busy and queue:
                    job = queue.popleft()
                    worker.conn.send(job)
                    now = time.monotonic()
                    busy[i] = (job, now, now + timeout_s)
            next_deadline = min(deadline for _, _, deadline in busy.values())
            ready = wait(
                [self.workers[i].conn for i in busy],
                timeout=max(0.0, next_deadline - time.monotonic()),
            )
            for i in [i for i in list(busy) if self.workers[i].conn in ready]:
                job, _, _ = busy.pop(i)
                try:
                    outcome = self.workers[i].conn.recv()
                except (EOFError, OSError):
                    self.cleanup(job)
                    self._replace(i)
                    outcome = Outcome(job.key, error="the worker process died (see its log)")
                done(job, outcome)
            now = time.monotonic()
            for i, (job, started, deadline) in list(busy.items()):
                if now >= deadline:
                    busy.pop(i)
                    self._replace(i)  # kills the process group first
                    self.cleanup(job)
                    done(job, Outcome(job.key, (), int((now - started) * 1000), timed_out=True))

    def kill(self) -> None:
        """Stop every worker at once (their jobs' databases are swept by the caller)."""
        for worker in self.workers:
            self._kill(worker)

    def close(self) -> None:
        for worker in self.workers:
            with contextlib.suppress(BrokenPipeError, OSError):
                worker.conn.send(None)
        for worker in self.workers:
            try:
                worker.process.wait(60)  # a worker exits once its last databases are dropped
            except subprocess.TimeoutExpired:
                self._kill(worker)
            else:
                worker.conn.close()


def run(
    migrations: SetFacts,
    revision: str,
    mutants: Sequence[Mutant],
    settings: Settings,
    progress: Callable[[int, Mutant, Outcome], None] | None = None,
    baseline_progress: Callable[[str], None] | None = None,
) -> RunResult:
    """Judge each mutant of `revision` with the gates (see the module docstring)."""
    from queueguard import revisions

    started = time.monotonic()
    token = uuid.uuid4().hex[:6]
    run_prefix = f"qgm{token}"
    tell = baseline_progress or (lambda _line: None)
    with Workspace(migrations.root) as workspace:
        (workspace.folder / "logs").mkdir()
        baseline_set = revisions.load(workspace.baseline)
        try:
            with ScratchDatabases(settings.admin_dsn, prefix=f"{run_prefix}t") as templates:
                tell(f"migrating a template to the predecessor of {revision}")
                shared = prepare(templates, baseline_set, revision)
                setup = Setup(
                    shared,
                    workspace.baseline,
                    workspace.folder / "jobs",
                    settings.fixtures_root,
                    settings.command,
                )

                def cleanup(job: Job) -> None:
                    drop_prefixed(settings.admin_dsn, f"{job.prefix}_")
                    workspace.discard(job.key)

                pool = Pool(setup, settings.jobs, cleanup, workspace.folder / "logs")
                try:
                    baselines = _baselines(pool, baseline_set, revision, settings, run_prefix)
                    tell(f"baselines pass every gate; judging {len(mutants)} mutants")
                    mutants_started = time.monotonic()
                    outcomes = _mutants(pool, mutants, settings, run_prefix, progress)
                except BaseException:  # Ctrl-C, a failed baseline: stop the workers now
                    pool.kill()
                    raise
                pool.close()  # waits for the workers' last drops: part of the mutants' time
                elapsed = int((time.monotonic() - mutants_started) * 1000)
        finally:
            drop_prefixed(settings.admin_dsn, run_prefix)
    total = int((time.monotonic() - started) * 1000)
    return RunResult(outcomes, baselines, elapsed, total, max(1, settings.jobs))


def _baselines(
    pool: Pool, migrations: SetFacts, revision: str, settings: Settings, run_prefix: str
) -> tuple[Outcome, ...]:
    rendered = rendered_files(revision_sites(migrations, revision))
    jobs = [
        Job("baseline", {}, f"{run_prefix}b0", exact=True, all_gates=True),
        Job("rendered", rendered, f"{run_prefix}b1", all_gates=True),
    ]
    found: dict[str, Outcome] = {}
    pool.run(jobs, max(BASELINE_TIMEOUT_S, settings.timeout_s * 5), _collect(found))
    problems = []
    for key, what in (
        ("baseline", "the unmodified migration set"),
        ("rendered", f"sqlglot's rendering of {revision}'s statements"),
    ):
        outcome = found[key]
        if outcome.error:
            raise MutationRunFailed(f"baseline {key}: {outcome.error}")
        if outcome.timed_out:
            problems.append(f"{what}: timed out")
        problems += [f"{what}: {g.name} {g.summary}\n{g.output}" for g in outcome.gates if not g.ok]
    if problems:
        raise BaselineFailed(
            "the gates fail without any mutation, so they cannot judge mutants:\n"
            + "\n".join(problems)
        )
    return (found["baseline"], found["rendered"])


def _collect(found: dict[str, Outcome]) -> Done:
    def done(job: Job, outcome: Outcome) -> None:
        found[job.key] = outcome

    return done


def _mutants(
    pool: Pool,
    mutants: Sequence[Mutant],
    settings: Settings,
    run_prefix: str,
    progress: Callable[[int, Mutant, Outcome], None] | None,
) -> tuple[Outcome, ...]:
    jobs = [
        Job(f"{n:04d}-{m.id}", {m.file: m.text}, f"{run_prefix}m{n:04d}")
        for n, m in enumerate(mutants)
    ]
    index = {job.key: n for n, job in enumerate(jobs)}
    found: dict[int, Outcome] = {}

    def done(job: Job, outcome: Outcome) -> None:
        if outcome.error:
            raise MutationRunFailed(f"mutant {job.key}: {outcome.error}")
        n = index[job.key]
        found[n] = outcome
        if progress is not None:
            progress(len(found), mutants[n], outcome)

    pool.run(jobs, settings.timeout_s, done)
    return tuple(found[n] for n in range(len(jobs)))
