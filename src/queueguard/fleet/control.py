"""The control database: a run's frozen manifest, each target's state and its lease with a
fencing token, shared by every runner of the run (SQL in `fleet/sql/control.sql`).

A claim is made under the run's row lock, so the waves' caps are counted and the target
taken in one transaction; the target itself is taken with SKIP LOCKED. Each claim raises
the target's fence; a runner records a target's end, or renews its lease, only under the
fence it claimed with — a runner whose lease was taken over (it stalled past its TTL) finds
its writes change nothing (`StaleFence`)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import random
import socket
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import psycopg
from psycopg.types.json import Jsonb

from queueguard.errors import ConnectionFailed, QueueguardError, UsageError
from queueguard.fleet.targets import FleetFile, Target, Wave
from queueguard.pg.connect import connect, connection_lost
from queueguard.pg.sqlfiles import queries

Q = queries("queueguard.fleet", "control.sql")
ENV_CONTROL = "QUEUEGUARD_CONTROL_DSN"
#: the control database on the embedded server (one runner on one machine)
EMBEDDED_CONTROL_DB = "queueguard_fleet"
#: how long a lost control connection is tried again before the operation gives up
RECONNECT_S = 30.0
#: a deadlock or a serialization failure: the transaction is simply run again
RETRY_AT_ONCE = ("40P01", "40001")
T = TypeVar("T")
STATES = ("pending", "running", "done", "failed", "skipped", "not in this run")


class StaleFence(QueueguardError):
    """A runner wrote under a fence another claim has raised since: nothing was recorded."""


@dataclass(frozen=True)
class RunSet:
    """What a run applies: the set and the revision it brings every target to."""

    format: str
    head: str | None
    checksum: str
    target_revision: str | None


@dataclass(frozen=True)
class Claim:
    name: str
    fence: int
    #: the lease was another runner's and expired (it may have finished or stopped mid-way)
    takeover: bool
    #: why the target fails at once (fleet plan: a statement over --max-lock), if it does
    refusal: str | None = None


def runner_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def identity(fleet: FleetFile, the_set: RunSet) -> str:
    """Who joins a run: the targets file (its name and its text: runners checked out at
    different paths join one run), the set (format, head, a checksum of its files) and the
    revision the run brings its targets to. Not what discovery finds: a database created
    after the run froze its manifest is reported as not in this run, it makes no new run."""
    doc = {
        "file": fleet.path.name, "text": fleet.digest, "format": the_set.format,
        "head": the_set.head, "checksum": the_set.checksum, "to": the_set.target_revision,
    }  # fmt: skip
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()


class Control:
    """One connection to the control database (one per thread: psycopg serialises a
    connection's use). A connection lost in the middle of an operation is opened again and
    the operation retried, for up to RECONNECT_S: a brief outage of the control database
    does not end a runner; a longer one does, with nothing recorded wrongly (a lease it
    cannot renew meanwhile cancels its target)."""

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self.conn = connect(dsn, application_name="queueguard-fleet", autocommit=False)

    def close(self) -> None:
        self.conn.close()

    def twin(self) -> Control:
        return Control(self.dsn)

    def _retried(self, work: Callable[[psycopg.Connection[Any]], T]) -> T:
        deadline = time.monotonic() + RECONNECT_S
        pause = 0.2
        while True:
            try:
                result = work(self.conn)
                self.conn.commit()
                return result
            except psycopg.OperationalError as exc:
                if exc.sqlstate in RETRY_AT_ONCE and time.monotonic() < deadline:
                    self.conn.rollback()  # a deadlock or serialization failure: again
                    time.sleep(random.uniform(0.01, 0.1))
                    continue
                if not connection_lost(exc) or time.monotonic() >= deadline:
                    raise
            with contextlib.suppress(Exception):
                self.conn.close()
            time.sleep(pause)
            pause = min(pause * 2, 2.0)
            with contextlib.suppress(ConnectionFailed):
                self.conn = connect(self.dsn, application_name="queueguard-fleet")

    def _one(self, name: str, params: Mapping[str, Any]) -> Any:
        return self._retried(lambda conn: conn.execute(Q[name], params).fetchone())

    def _count(self, name: str, params: Mapping[str, Any]) -> int:
        return self._retried(lambda conn: conn.execute(Q[name], params).rowcount)

    def setup(self) -> None:
        """The control schema, made by the first runner (under an advisory lock, so runners
        starting together make it once); nothing run, nothing locked, once it exists."""
        row = self.conn.execute(Q["set_up"]).fetchone()
        self.conn.commit()
        if row is not None and row[0]:
            return
        with self.conn.transaction():
            self.conn.execute(Q["setup_lock"])
            self.conn.execute(Q["setup"])
        self.conn.commit()

    # --- runs --------------------------------------------------------------------------------
    def find(self, ident: str, *, unfinished: bool = True) -> tuple[int, RunSet] | None:
        row = self._one("open_run" if unfinished else "newest_run", {"identity": ident})
        return (int(row[0]), RunSet(row[1], row[2], row[3], row[4])) if row else None

    def by_id(self, run: int) -> RunSet:
        row = self._one("run_by_id", {"run": run})
        if row is None:
            raise UsageError(f"no fleet run {run} in the control database")
        return RunSet(row[1], row[2], row[3], row[4])

    def create(
        self,
        ident: str,
        the_set: RunSet,
        waves: Sequence[Wave],
        members: Sequence[Sequence[Target]],
        exclusive: Mapping[str, bool],
        *,
        new: bool = False,
    ) -> tuple[int, RunSet, bool]:
        """A new run with its manifest frozen (every target, its wave, its place); without
        `new`, the open run of this identity a runner starting at the same moment made.
        (run, its set, whether this call made it)."""
        with self.conn.transaction():
            self.conn.execute(Q["setup_lock"])  # one run per identity when runners race
            found = (
                None if new else self.conn.execute(Q["open_run"], {"identity": ident}).fetchone()
            )
            if found is not None:
                return int(found[0]), RunSet(found[1], found[2], found[3], found[4]), False
            row = self.conn.execute(
                Q["create_run"],
                {"identity": ident, "format": the_set.format, "head": the_set.head,
                 "checksum": the_set.checksum, "target": the_set.target_revision},
            ).fetchone()  # fmt: skip
            assert row is not None
            run = int(row[0])
            with self.conn.cursor() as cur:
                cur.executemany(
                    Q["add_wave"],
                    [{"run": run, "position": i, "name": w.name, "parallel": w.parallel,
                      "on_error": w.on_error, "max_failures": w.max_failures}
                     for i, w in enumerate(waves)],
                )  # fmt: skip
                rows = [
                    _target_row(run, position, wave, t, exclusive.get(t.name, False), "pending")
                    for position, (wave, t) in enumerate(
                        (i, t) for i, found in enumerate(members) for t in found
                    )
                ]
                cur.executemany(Q["add_target"], rows)
        self.conn.commit()
        self._retried(lambda conn: conn.execute(Q["analyze"]))
        return run, the_set, True

    def not_in_run(self, run: int, targets: Sequence[Target]) -> list[str]:
        """Targets this runner found that the run's frozen manifest does not hold: recorded
        as such, never touched."""
        known = {r[0] for r in self.conn.execute(Q["manifest"], {"run": run}).fetchall()}
        extra = [t for t in targets if t.name not in known]
        with self.conn.cursor() as cur:
            cur.executemany(
                Q["add_target"],
                [_target_row(run, 1_000_000 + i, None, t, False, "not in this run")
                 for i, t in enumerate(extra)],
            )  # fmt: skip
        self.conn.commit()
        return [t.name for t in extra]

    def manifest(self, run: int) -> list[tuple[str, int | None, str]]:
        rows = self._retried(lambda conn: conn.execute(Q["manifest"], {"run": run}).fetchall())
        return [(r[0], r[1], r[2]) for r in rows]

    def waves(self, run: int) -> list[Wave]:
        rows = self._retried(lambda conn: conn.execute(Q["waves"], {"run": run}).fetchall())
        return [Wave(r[1], {}, int(r[2]), r[3], r[4]) for r in rows]

    def retry_failed(self, run: int) -> int:
        """A rerun of a run nobody works: its failed targets pending again (under the run's
        lock, so no claim of another runner meets it half done)."""

        def work(conn: psycopg.Connection[Any]) -> int:
            conn.execute(Q["lock_run"], {"run": run})
            return conn.execute(Q["retry_failed"], {"run": run}).rowcount

        return self._retried(work)

    # --- claims and leases -------------------------------------------------------------------
    def claim(self, run: int, runner: str, ttl_s: float, caps: Mapping[str, int]) -> Claim | None:
        """The next target this runner may take, or None (the wave is at its cap, waits for
        its last targets, or the run has stopped or has nothing left)."""

        def work(conn: psycopg.Connection[Any]) -> Claim | None:
            row = conn.execute(Q["lock_run"], {"run": run}).fetchone()
            if row is None or row[0] is not None:
                return None
            wave = conn.execute(Q["current_wave"], {"run": run}).fetchone()
            if wave is None or int(wave[2]) >= int(wave[1]):
                return None
            found = conn.execute(
                Q["candidate"], {"run": run, "wave": wave[0], "caps": Jsonb(dict(caps))}
            ).fetchone()
            if found is None:
                return None
            fence = conn.execute(
                Q["claim"], {"run": run, "name": found[0], "runner": runner, "ttl": ttl_s}
            ).fetchone()
            assert fence is not None
            return Claim(found[0], int(fence[0]), bool(found[1]), fence[1])

        return self._retried(work)

    def predict(self, run: int, figures: Mapping[str, tuple[float | None, str | None]]) -> None:
        """{name: (predicted ms, refusal)} from fleet plan, for a run's targets."""

        def work(conn: psycopg.Connection[Any]) -> None:
            with conn.cursor() as cur:
                cur.executemany(
                    Q["predict"],
                    [{"run": run, "name": name, "predicted_ms": None if ms is None else int(ms),
                      "refusal": refusal} for name, (ms, refusal) in figures.items()],
                )  # fmt: skip

        self._retried(work)

    def renew(self, run: int, claim: Claim, ttl_s: float) -> bool:
        params = {"run": run, "name": claim.name, "fence": claim.fence, "ttl": ttl_s}
        return self._count("renew", params) == 1

    def alive(self, run: int, ttl_s: float) -> str | None:
        """This runner is alive (for `retry_failed`); why the run stopped, if it did."""
        row = self._one("alive", {"run": run, "ttl": ttl_s})
        return row[0] if row else None

    def record(
        self,
        run: int,
        claim: Claim,
        state: str,
        *,
        revision: str | None = None,
        error: str | None = None,
        elapsed_ms: int | None = None,
        lock_waits: int = 0,
    ) -> None:
        """A claimed target's end, under its fence; StaleFence when another claim has
        raised it since (nothing is written). A record whose answer was lost with the
        connection, and which was made, counts as made."""
        params = {"run": run, "name": claim.name, "fence": claim.fence, "state": state,
                  "revision": revision, "error": error, "elapsed_ms": elapsed_ms,
                  "lock_waits": lock_waits}  # fmt: skip
        if self._count("record", params) == 1:
            return
        row = self._one("recorded", {"run": run, "name": claim.name})
        if row is not None and row[0] == state and int(row[1]) == claim.fence:
            return
        raise StaleFence(
            f"{claim.name}: fence {claim.fence} is stale (another runner claimed it since): "
            "nothing recorded"
        )

    def done_unclaimed(self, run: int, names: list[str], revision: str | None) -> list[str]:
        """`names` recorded done at `revision` with no claim; those still pending were.
        Committed without waiting for the control server's disk: what it records is read
        from the targets' own ledgers, and a run that lost it reads them again."""
        params = {"run": run, "names": names, "revision": revision}

        def mark(conn: psycopg.Connection[Any]) -> list[Any]:
            conn.execute("SET LOCAL synchronous_commit = off")
            return conn.execute(Q["done_unclaimed"], params).fetchall()

        return [str(r[0]) for r in self._retried(mark)]

    def skipped_unclaimed(self, run: int, name: str, revision: str | None, why: str) -> bool:
        params = {"run": run, "name": name, "revision": revision, "error": why}
        return self._count("skipped_unclaimed", params) == 1

    def failures(self, run: int, wave: int) -> int:
        return int(self._one("failures", {"run": run, "wave": wave})[0])

    def stop(self, run: int, reason: str) -> None:
        self._count("stop", {"run": run, "reason": reason})

    def skip_stopped(self, run: int) -> int:
        return self._count("skip_stopped", {"run": run})

    def live(self, run: int) -> tuple[int, int, bool, str | None]:
        """(pending, running, finished, why stopped)."""
        row = self._one("live", {"run": run})
        return int(row[0]), int(row[1]), bool(row[2]), row[3]

    def finish(self, run: int) -> bool:
        return self._count("finish", {"run": run}) == 1

    def board(self, run: int) -> list[tuple[Any, ...]]:
        return self._retried(lambda conn: conn.execute(Q["board"], {"run": run}).fetchall())


def _target_row(
    run: int, position: int, wave: int | None, t: Target, exclusive: bool, state: str
) -> dict[str, Any]:
    return {
        "run": run, "name": t.name, "position": position, "wave": wave, "dsn": t.redacted,
        "server": t.server, "database": t.database, "schema": t.schema,
        "labels": Jsonb(t.labels), "exclusive": exclusive, "state": state,
    }  # fmt: skip


def resolve_dsn(given: str | None) -> str:
    """`--control`, else QUEUEGUARD_CONTROL_DSN, else a database on the embedded server."""
    from queueguard.pg.dsn import validate
    from queueguard.pg.targets import embedded_dsn

    if given:
        return validate(given)
    env = os.environ.get(ENV_CONTROL)
    if env:
        return validate(env)
    return embedded_dsn(EMBEDDED_CONTROL_DB)


def open_control(dsn: str) -> Control:
    """The control database, its schema created if missing; unreachable: exit 2."""
    try:
        control = Control(dsn)
        control.setup()
    except psycopg.Error as exc:
        from queueguard.errors import ConnectionFailed
        from queueguard.pg.connect import reason

        raise ConnectionFailed(f"the control database: {reason(exc)}") from None
    return control
