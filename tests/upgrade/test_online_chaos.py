"""Chaos at CI scale for `queueguard upgrade --online` (003 -> 004 while hosts keep running).

1. SIGKILL of the migrating process (the CLI, `--phase migrate --batch-size 50 --lease 2s`) at
   seeded random points of migrate, its rerun already waiting: after every kill each task is
   still there exactly once and in its family, no acknowledged id holds a row, directives
   are History's, and the progress record matches the committed work; the rerun takes over
   within about the lease (never before the dead lease ran out); the last run does only what
   is left; the end state equals offline 004 of a clone of the same input.
2. A server restart mid-migrate (a private ScratchServer, fast and immediate stop): the
   migrator exits 2 with one clear line, the rerun resumes and ends equal to offline.
3. Two concurrent migrators, directly and through PgBouncer (transaction pooling): one does
   the work, the other waits and finds the phase done (or, with a short --wait, reports
   MigratorBusy, exit 1); the end state equals offline and no lease or lock is left.

The input is the golden v0.3 fixture (legacy @auto queues, hostile names, stale counters)
plus bench/common/v3_database.py's 20,000 rows (half in @auto queues). Online ends with
rangeId at least one higher than offline on the @auto sources it drained (the migrator fences
each source again whenever a run starts on it); everything else must be equal.
"""

from __future__ import annotations

import functools
import json
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import psycopg
import pytest

from bench.common.servers import ScratchServer
from bench.common.v3_database import seed_v3
from queueguard.pg import scratch
from queueguard.pg.connect import connect, connection
from queueguard.queue_schema import golden, online
from queueguard.queue_schema.runner import upgrade
from queueguard.queue_schema.state import export_database
from queueguard.snapshot import normalise

ROWS = 20_000  # seed_v3's rows on top of the golden fixture's
LEASE_S = 2.0
WAIT_SLACK_S = 2.0  # the lease poll (0.5 s), a batch and the reads before, on a noisy machine
START_SLACK_S = 8.0  # plus a CLI process's start-up, on a loaded 2-core machine
KILLS = 12
SEED = 4_004
KNOBS = online.Knobs(batch_size=50, lease_s=LEASE_S, max_lag_s=None)

pytestmark = pytest.mark.slow


# the input and the offline reference ------------------------------------------------------
def build_v3(dsn: str) -> None:
    golden.load(golden.get("v0.3"), dsn)
    seed_v3(dsn, ROWS)


def export(dsn: str) -> dict[str, Any]:
    with connection(dsn) as conn:
        return normalise(export_database(conn))


def offline_004(admin: str, template: str) -> dict[str, Any]:
    """The end state of offline 004 on a clone of `template`."""
    dsn = scratch.create_database(admin, template=template)
    try:
        upgrade(dsn, progress=False)
        return export(dsn)
    finally:
        scratch.drop_database(admin, scratch.dbname_of(dsn))


@pytest.fixture(scope="module")
def v3_template(pg_admin_dsn: str) -> Iterator[str]:
    dsn = scratch.create_database(pg_admin_dsn, prefix="qgtpl")
    build_v3(dsn)
    yield scratch.dbname_of(dsn)
    scratch.drop_database(pg_admin_dsn, scratch.dbname_of(dsn))


@pytest.fixture(scope="module")
def offline_doc(pg_admin_dsn: str, v3_template: str) -> dict[str, Any]:
    return offline_004(pg_admin_dsn, v3_template)


def assert_equals_offline(found: dict[str, Any], expected: dict[str, Any]) -> None:
    """Equal but for rangeId of legacy @auto queues, where online is at least offline (the
    migrator fences a source once more than offline, once per run that resumes on it)."""
    assert {k: v for k, v in found.items() if k != "queues"} == {
        k: v for k, v in expected.items() if k != "queues"
    }
    mine = {q["physicalQueue"]: q for q in found["queues"]}
    theirs = {q["physicalQueue"]: q for q in expected["queues"]}
    assert sorted(mine) == sorted(theirs)
    diffs = []
    for key, want in theirs.items():
        got = mine[key]
        if key.endswith("@auto"):
            assert got["rangeId"] >= want["rangeId"], (key, got["rangeId"], want["rangeId"])
            got = {**got, "rangeId": want["rangeId"]}
        diffs += [(key, field) for field in want if got[field] != want[field]]
    assert not diffs, f"online differs from offline 004 at {diffs[:10]}"


# what must hold after every kill -----------------------------------------------------------
@dataclass(frozen=True)
class Rollout:
    phase: str
    holder: str | None
    lease_until: datetime | None
    rows_done: int

    def held_by(self, proc: subprocess.Popen[str]) -> bool:
        return self.holder is not None and self.holder.rsplit(":", 2)[1] == str(proc.pid)


ROLLOUT = "SELECT phase, holder, lease_until, rows_done FROM queueguard_rollout"


@dataclass(frozen=True)
class Census:
    """The database as of one snapshot (REPEATABLE READ): it may be taken while a migrator
    commits batches."""

    rows: int
    fingerprint: str  # every payload (without its directive) and created_at, as a multiset
    families: dict[str, int]  # rows per queue key without its @auto suffix
    with_directive: int
    auto_with_directive: int
    wrong_directive: int
    orphaned_or_acked: int  # rows without a queue row, or at or below its ack level
    stale_counters: int  # queues whose last_task_id is below their highest stored id
    rollout: Rollout | None

    @classmethod
    def of(cls, dsn: str) -> Census:
        with connection(dsn, application_name="qg-chaos-check") as conn:
            conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
            conn.read_only = True
            conn.execute("SET TIME ZONE 'UTC'")

            def one(sql: str) -> Any:
                row = conn.execute(sql).fetchone()
                assert row is not None
                return row[0] if len(row) == 1 else row

            rows, fingerprint = one(
                "SELECT count(*), md5(coalesce(string_agg(x, E'\\n' ORDER BY x), '')) FROM ("
                "  SELECT (data #- '{task,versionDirective}')::text || ' ' || created_at::text"
                "  AS x FROM tasks) s"
            )
            families = dict(
                conn.execute(
                    "SELECT regexp_replace(physical_queue, '@auto$', ''), count(*) FROM tasks "
                    "GROUP BY 1"
                ).fetchall()
            )
            rollout = None
            if one("SELECT to_regclass('queueguard_rollout') IS NOT NULL"):
                found = conn.execute(ROLLOUT).fetchone()
                rollout = Rollout(*found) if found else None
            census = cls(
                rows=rows,
                fingerprint=fingerprint,
                families=families,
                with_directive=one(
                    "SELECT count(*) FROM tasks WHERE data -> 'task' ? 'versionDirective'"
                ),
                auto_with_directive=one(
                    "SELECT count(*) FROM tasks t JOIN task_queues q USING (physical_queue) "
                    "WHERE q.version = 'auto' AND t.data -> 'task' ? 'versionDirective'"
                ),
                wrong_directive=one(
                    "SELECT count(*) FROM tasks t "
                    "LEFT JOIN executions e ON e.run_id::text = t.data -> 'task' ->> 'runId' "
                    "WHERE t.data -> 'task' ? 'versionDirective' "
                    "AND t.data -> 'task' -> 'versionDirective' IS DISTINCT FROM CASE "
                    "  WHEN e.run_id IS NULL "
                    '  THEN \'{"behavior": "unversioned", "deploymentVersion": null}\' '
                    "  ELSE jsonb_build_object('behavior', e.versioning_behavior, "
                    "                          'deploymentVersion', e.deployment_version) END"
                ),
                orphaned_or_acked=one(
                    "SELECT count(*) FROM tasks t LEFT JOIN task_queues q USING (physical_queue) "
                    "WHERE q.physical_queue IS NULL OR t.task_id <= q.ack_level"
                ),
                stale_counters=one(
                    "SELECT count(*) FROM task_queues q WHERE q.last_task_id < "
                    "(SELECT max(t.task_id) FROM tasks t WHERE t.physical_queue = q.physical_queue)"
                ),
                rollout=rollout,
            )
            conn.rollback()
            return census


def assert_sound(dsn: str, before: Census, where: str) -> Census:
    """No task lost, duplicated or moved out of its family; only History's directives, never
    on a row still in an @auto queue; the progress record counts exactly the committed rows;
    once any row was migrated every counter is repaired (repair runs first)."""
    now = Census.of(dsn)
    assert (now.rows, now.fingerprint) == (before.rows, before.fingerprint), where
    assert now.families == before.families, where
    assert now.orphaned_or_acked == 0, where
    assert now.auto_with_directive == 0, where
    assert now.wrong_directive == 0, where
    if now.rollout is not None:
        assert now.rollout.rows_done == now.with_directive, where
    if now.with_directive:
        assert now.stale_counters == 0, where
    return now


class Watch:
    """Reads the rollout record over a direct connection of its own (never the migrator's)."""

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self.conn = connect(dsn, autocommit=True, application_name="qg-chaos-watch")

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> Watch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def rollout(self) -> Rollout | None:
        try:
            row = self.conn.execute(ROLLOUT).fetchone()
        except psycopg.errors.UndefinedTable:
            return None
        return Rollout(*row) if row else None

    def until(
        self, proc: subprocess.Popen[str], done: Callable[[Rollout], bool], timeout: float = 60
    ) -> Rollout | None:
        """Poll until `done(rollout)` (that rollout) or `proc` exits (None)."""
        deadline = time.monotonic() + timeout
        while proc.poll() is None:
            found = self.rollout()
            if found is not None and done(found):
                return found
            assert time.monotonic() < deadline, "the migrator made no progress"
            time.sleep(0.005)
        return None

    def migrators(self) -> set[int]:
        """Server pids of the migrators' sessions (application_name queueguard-online)."""
        return {
            int(pid)
            for (pid,) in self.conn.execute(
                "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
                "AND application_name = 'queueguard-online'"
            )
        }

    def nothing_held(self) -> None:
        """No lock held and no transaction open by any other client session on the database
        (autovacuum, busy after the migration's updates, is not a client)."""
        left = self.conn.execute(
            "SELECT a.pid, a.application_name, a.state, l.locktype, l.mode "
            "FROM pg_stat_activity a LEFT JOIN pg_locks l ON l.pid = a.pid "
            "WHERE a.datname = current_database() AND a.pid <> pg_backend_pid() "
            "AND a.backend_type = 'client backend' "
            "AND (l.pid IS NOT NULL OR a.state LIKE 'idle in transaction%')"
        ).fetchall()
        assert not left, left


# the migrator, as an operator runs it ------------------------------------------------------
SPAWNED: list[subprocess.Popen[str]] = []


@pytest.fixture(autouse=True)
def _reap_migrators() -> Iterator[None]:
    """A failed test leaves no migrator of its own behind (e.g. a successor still waiting)."""
    yield
    while SPAWNED:
        proc = SPAWNED.pop()
        if proc.poll() is None:
            proc.kill()
        proc.communicate()


def migrator(dsn: str, *extra: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [
            *(sys.executable, "-m", "queueguard.cli", "upgrade", "--online", "--dsn", dsn),
            *("--batch-size", "50", "--lease", f"{LEASE_S:.0f}s", "--json", *extra),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    SPAWNED.append(proc)
    return proc


def finish(proc: subprocess.Popen[str], timeout: float = 120) -> tuple[int, dict[str, Any], str]:
    """Exit code, the JSON report (empty when there is none) and stderr."""
    out, err = proc.communicate(timeout=timeout)
    return proc.returncode, (json.loads(out) if out.strip() else {}), err


def error_lines(stderr: str) -> list[str]:
    assert "Traceback" not in stderr, stderr
    return [line for line in stderr.splitlines() if line.startswith("queueguard: error:")]


def work(report: dict[str, Any]) -> int:
    """Rows a run migrated: relocated (each gets its directive) plus directives stamped."""
    return int(report["directives"]) + sum(report["relocated"].values())


# 1. SIGKILL at random points of migrate ---------------------------------------------------
def follow(
    watch: Watch,
    proc: subprocess.Popen[str],
    done: Callable[[Rollout], bool],
    victim: int,
    ready: float | None,
) -> tuple[Rollout, float | None]:
    """Poll until `done(rollout)` while `proc` runs; `ready` becomes the moment a migrator
    other than the `victim` backend first connected (the successor)."""
    deadline = time.monotonic() + 60
    while True:
        assert proc.poll() is None, f"a migrator exited: {finish(proc)}"
        assert time.monotonic() < deadline, "no progress in 60 s"
        if ready is None and watch.migrators() - {victim}:
            ready = time.monotonic()
        found = watch.rollout()
        if found is not None and done(found):
            return found, ready
        time.sleep(0.005)


def test_sigkill_at_random_points_of_migrate_then_a_rerun_resumes(
    make_db: Callable[..., str], v3_template: str, offline_doc: dict[str, Any]
) -> None:
    """Each migrator is killed at a seeded share of migrate's rows plus a seeded delay. Its
    successor is started as soon as it holds the lease (an operator's or a supervisor's
    rerun), so it usually waits on the lease at the kill; it takes over once the dead lease
    ran out and not much later (from the kill, or from its connect when that came later)."""
    rng = random.Random(SEED)
    dsn = make_db(template=v3_template)
    before = Census.of(dsn)
    assert before.with_directive == 0  # so rows_done runs from 0 to before.rows
    online.run(dsn, phase="expand", knobs=KNOBS)
    targets = sorted(int(rng.uniform(0, 0.9) * before.rows) for _ in range(KILLS))
    kills: list[int] = []  # rows_done at each kill
    waited: list[float] = []  # from max(kill, successor connected) to its lease
    blocked: list[float] = []  # from the kill to the successor's lease
    with Watch(dsn) as watch:
        victim = migrator(dsn, "--phase", "migrate")
        assert watch.until(victim, lambda r: r.held_by(victim)), finish(victim)
        for target in targets:
            (backend,) = watch.migrators()  # the victim's: its successor is not started yet
            successor = migrator(dsn, "--phase", "migrate", "--wait", "60s")
            successor_holds = functools.partial(Rollout.held_by, proc=successor)
            ready: float | None = None  # when the successor connected
            last, ready = follow(
                watch, victim, lambda r, t=target: r.rows_done >= t, backend, ready
            )
            time.sleep(rng.uniform(0, 0.05))
            victim.send_signal(signal.SIGKILL)
            killed_at = time.monotonic()
            assert victim.wait(30) == -signal.SIGKILL
            victim.communicate()
            while backend in watch.migrators():  # its transaction is over
                assert time.monotonic() - killed_at < 30, "the killed backend lingered"
                time.sleep(0.01)
            census = assert_sound(dsn, before, f"after kill {len(kills) + 1} at {target} rows")
            assert census.rollout is not None and census.rollout.phase == "migrate"
            # the dead holder's lease and progress, exact unless (on a very slow machine) the
            # successor took over before the census
            exact = census.rollout.holder == last.holder
            last = census.rollout if exact else last
            assert last.lease_until is not None
            kills.append(last.rows_done)

            took, ready = follow(watch, successor, successor_holds, backend, ready)
            now = time.monotonic()
            blocked.append(now - killed_at)
            waited.append(now - max(killed_at, ready or now))
            # the lease excludes: taken (now() of the taking transaction) only once the dead
            # holder's lease had run out
            assert took.lease_until is not None
            assert took.lease_until - timedelta(seconds=LEASE_S) >= last.lease_until
            victim = successor

        code, report, err = finish(victim)  # the last successor runs migrate to its end
        assert code == 0, err
        assert report["phases"] == ["migrate"] and report["phase"] == "contract"
        if exact:  # the rest, nothing twice
            assert work(report) == before.rows - kills[-1]
        else:
            assert work(report) <= before.rows - kills[-1]
        census = assert_sound(dsn, before, "after migrate")
        assert census.rollout is not None and census.rollout.holder is None  # released
        assert census.with_directive == before.rows
        watch.nothing_held()

    code, report, err = finish(migrator(dsn, "--phase", "contract"))
    assert code == 0 and report["phase"] == "done", err
    assert_equals_offline(export(dsn), offline_doc)
    assert len(kills) >= 10 and len(set(kills)) >= 10, kills  # ten different points at least
    assert kills[0] < before.rows // 2 < kills[-1], kills  # in relocation and in directives
    # a rerun waits for the dead lease, not longer
    assert max(waited) <= LEASE_S + WAIT_SLACK_S, waited
    assert max(blocked) <= LEASE_S + START_SLACK_S, blocked
    print(
        f"\nkilled at rows_done {kills} of {before.rows}; the successors took over "
        f"{' '.join(f'{w:.2f}' for w in waited)} s after the kill (or their connect), "
        f"{' '.join(f'{b:.2f}' for b in blocked)} s after the kill"
    )


# 2. A server restart mid-migrate ----------------------------------------------------------
@pytest.mark.parametrize("mode", ["fast", "immediate"])
def test_server_restart_mid_migrate_fails_clearly_and_a_rerun_resumes(mode: str) -> None:
    with ScratchServer() as server:
        admin = server.admin_dsn()
        dsn = scratch.create_database(admin)
        build_v3(dsn)
        expected = offline_004(admin, scratch.dbname_of(dsn))
        before = Census.of(dsn)
        online.run(dsn, phase="expand", knobs=KNOBS)
        proc = migrator(dsn, "--phase", "migrate")
        with Watch(dsn) as watch:
            reached = watch.until(proc, lambda r: r.rows_done >= before.rows * 2 // 5)
        assert reached is not None, f"migrate ended early: {finish(proc)}"
        server.stop(mode)
        stopped_at = time.monotonic()
        code, report, err = finish(proc, timeout=60)
        assert time.monotonic() - stopped_at < 30
        errors = error_lines(err)
        assert code == 2 and report == {}, err
        assert len(errors) == 1, err
        assert "lost the server" in errors[0] and "rerun" in errors[0], errors
        assert "['" not in errors[0], errors  # the server's message, not a Python list

        server.start()
        with Watch(dsn) as watch:
            state = assert_sound(dsn, before, f"after a {mode} restart").rollout
            assert state is not None and state.phase == "migrate"
            assert 0 < state.rows_done < before.rows
            code, report, err = finish(migrator(dsn, "--phase", "migrate"))
            assert code == 0, err
            assert work(report) == before.rows - state.rows_done  # resumed, not redone
            watch.nothing_held()
        code, report, err = finish(migrator(dsn, "--phase", "contract"))
        assert code == 0 and report["phase"] == "done", err
        assert_equals_offline(export(dsn), expected)


# 3. Two concurrent migrators --------------------------------------------------------------
def route_dsn(request: pytest.FixtureRequest, route: str, dsn: str) -> str:
    if route == "direct":
        return dsn
    return str(request.getfixturevalue("pgbouncer").dsn(scratch.dbname_of(dsn)))


@pytest.mark.parametrize("phase", ["migrate", "all"])
@pytest.mark.parametrize("route", ["direct", "pgbouncer"])
def test_two_concurrent_migrators_one_works_the_other_finds_it_done(
    request: pytest.FixtureRequest,
    make_db: Callable[..., str],
    v3_template: str,
    offline_doc: dict[str, Any],
    route: str,
    phase: str,
) -> None:
    dsn = make_db(template=v3_template)
    target = route_dsn(request, route, dsn)
    before = Census.of(dsn)
    extra: tuple[str, ...] = ("--wait", "120s")  # longer than the whole run, on any machine
    # A lease longer than any batch on a loaded machine: what this test judges is that the
    # waiter finds the work done, not a takeover after an expiry (tests of their own above)
    extra += ("--lease", "20s")
    if phase == "migrate":
        online.run(dsn, phase="expand", knobs=KNOBS)
        extra += ("--phase", "migrate")
    procs = [migrator(target, *extra) for _ in range(2)]
    holders: set[str] = set()
    censuses, checked = 0, 0.0
    with Watch(dsn) as watch:
        while any(p.poll() is None for p in procs):
            found = watch.rollout()
            if found is not None and found.holder is not None:
                holders.add(found.holder.rsplit(":", 2)[1])
            if time.monotonic() - checked > 0.5:  # sound in every snapshot meanwhile
                assert_sound(dsn, before, f"snapshot {censuses + 1} during the run")
                censuses, checked = censuses + 1, time.monotonic()
            time.sleep(0.005)
        assert censuses >= 3
        results = [finish(p) for p in procs]
        for code, _report, err in results:
            assert code == 0, err
        worked = [i for i, (_, r, _) in enumerate(results) if "migrate" in r["phases"]]
        assert len(worked) == 1, [r for _, r, _ in results]
        other = results[1 - worked[0]][1]
        assert other["phases"] == [] and work(other) == 0, other  # waited, found it done
        assert work(results[worked[0]][1]) == before.rows
        assert holders == {str(procs[worked[0]].pid)}  # one migrator held the lease
        state = watch.rollout()
        if phase == "migrate":
            assert state is not None and state.phase == "contract" and state.holder is None
            assert state.rows_done == before.rows  # nothing moved or stamped twice
        else:
            assert state is None
        watch.nothing_held()
    if phase == "migrate":
        online.run(dsn, phase="contract", knobs=KNOBS)
    assert_equals_offline(export(dsn), offline_doc)


@pytest.mark.parametrize("route", ["direct", "pgbouncer"])
def test_a_second_migrator_that_waits_too_long_reports_migrator_busy(
    request: pytest.FixtureRequest,
    make_db: Callable[..., str],
    v3_template: str,
    offline_doc: dict[str, Any],
    route: str,
) -> None:
    dsn = make_db(template=v3_template)
    target = route_dsn(request, route, dsn)
    online.run(dsn, phase="expand", knobs=KNOBS)
    first = migrator(target, "--phase", "migrate", "--pause", "5ms")
    with Watch(dsn) as watch:
        holding = watch.until(first, lambda r: r.held_by(first))
        assert holding is not None and holding.holder is not None, finish(first)
        code, report, err = finish(migrator(target, "--phase", "migrate", "--wait", "1s"))
        assert first.poll() is None, "the first migrator ended before the second gave up"
        errors = error_lines(err)
        assert code == 1 and report == {} and len(errors) == 1, err
        assert f"another online migrator ({holding.holder}) held the rollout's lease" in errors[0]
        code, report, err = finish(first)
        assert code == 0 and report["phases"] == ["migrate"], err
        state = watch.rollout()
        assert state is not None and state.phase == "contract" and state.holder is None
        watch.nothing_held()
    online.run(dsn, phase="contract", knobs=KNOBS)
    assert_equals_offline(export(dsn), offline_doc)
