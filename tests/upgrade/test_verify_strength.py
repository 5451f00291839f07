"""verify's checks against the mistakes they exist for: each new check fails on the mutant
(an edited copy of the migration set, `--migrations DIR` style, manifest regenerated) it
targets, and its pure parts do what they say.

- `rows`: every column of every row (a relocated row's `created_at` reset to now, offline
  and online);
- `refusals`: the negative cases handed to upgrade (the guard switched off);
- `contention`: upgrade gives up on a lock held elsewhere (the lock timeout removed);
- the online check's observer: the marker index built or dropped without CONCURRENTLY;
- the probe between batches and beside other objects: the ten online survivors of
  docs/mutation.md, by mutant id.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from queueguard import revisions
from queueguard.engine import catalog, locks
from queueguard.engine.apply.ladder import RETRY_SLEEP_S, ladder_s
from queueguard.mutate.generate import generate
from queueguard.mutate.workspace import materialise
from queueguard.pg.connect import connection
from queueguard.pg.scratch import ScratchDatabases
from queueguard.queue_schema import golden, manifest, rows, verify
from queueguard.queue_schema.golden import NegativeCase
from queueguard.queue_schema.online.between import Source, source_problems
from queueguard.queue_schema.online.watch import plan
from queueguard.queue_schema.refusals import Attempt, problems
from queueguard.queue_schema.runner import upgrade
from queueguard.queue_schema.verify import report as verify_report
from queueguard.resources import migrations_dir
from queueguard.revisions import SetFacts

SQL = migrations_dir() / "sql" / "004"


# pure parts --------------------------------------------------------------------------------
def test_conflicts_are_symmetric_and_the_chosen_modes_separate() -> None:
    for a in locks.MODES:
        for b in locks.MODES:
            assert (b in locks.CONFLICTS[a]) == (a in locks.CONFLICTS[b]), (a, b)
    assert locks.weakest_conflicting("ACCESS EXCLUSIVE") == "ACCESS SHARE"
    assert locks.weakest_conflicting("ROW EXCLUSIVE") == "SHARE"
    for ceiling in [None, *locks.MODES]:
        try:
            guard = locks.guard_above(ceiling)
        except ValueError:
            assert ceiling == "SHARE"  # no mode blocks SHARE ROW EXCLUSIVE but not SHARE
            continue
        allowed = [] if ceiling is None else locks.MODES[: locks.MODES.index(ceiling) + 1]
        above = [m for m in locks.MODES if m not in allowed]
        if guard is None:
            assert not above
            continue
        assert all(m in locks.CONFLICTS[guard] for m in above), ceiling
        assert not any(m in locks.CONFLICTS[guard] for m in allowed), ceiling
    # 004's tasks ceiling: writers' ROW EXCLUSIVE held, so SHARE (a plain CREATE INDEX) waits
    assert locks.guard_above("SHARE UPDATE EXCLUSIVE") == "ROW EXCLUSIVE"


def test_the_watch_holds_every_limited_table_but_the_bookkeeping() -> None:
    ceiling = {"tasks": "SHARE UPDATE EXCLUSIVE", "task_queues": "ACCESS EXCLUSIVE"}
    held = plan(["tasks", "task_queues", "executions", "queueguard_rollout"], ceiling)
    assert held == {"tasks": "ROW EXCLUSIVE", "executions": "ACCESS EXCLUSIVE"}


def test_the_ladder_bounds_every_wait_and_sleep() -> None:
    assert ladder_s(100, 0) == pytest.approx(0.1)
    assert ladder_s(100, 1) == pytest.approx(0.1 + 0.15 + RETRY_SLEEP_S[1])
    assert ladder_s(1000, 2) == pytest.approx(1 + 1.5 + 2.25 + RETRY_SLEEP_S[1] * 3)


def test_row_documents_are_compared_column_by_column() -> None:
    expected = {"tasks": [{"physical_queue": "q", "task_id": 1, "created_at": "2026-01-01"}]}
    actual = {"tasks": [{"physical_queue": "q", "task_id": 1, "created_at": rows.NOW}]}
    (found,) = rows.differences(expected, actual)
    assert "tasks row 1 (q, 1): created_at" in found and rows.NOW in found
    assert rows.differences(expected, expected) == []
    assert rows.project(actual, without={"tasks": {"created_at"}}) == {
        "tasks": [{"physical_queue": "q", "task_id": 1}]
    }
    ledger = {"queueguard_migrations": [{"revision": "004", "sha256": "ab"}]}
    assert rows.substitute(ledger, "queueguard_migrations", "sha256", {"ab": rows.MANIFEST}) == {
        "queueguard_migrations": [{"revision": "004", "sha256": rows.MANIFEST}]
    }


def test_source_invariants_between_two_batches() -> None:
    before = Source(ack=4, last=9, ids=(3, 4, 5, 6, 7))
    assert source_problems("s", before, Source(4, 9, (5, 6, 7))) == []
    assert source_problems("s", Source(4, 9, (5, 6, 7)), Source(6, 9, (7,))) == []
    # the moved id taken as min instead of max: ids that are gone are not done
    assert "below 6" in " ".join(source_problems("s", Source(4, 9, (5, 6, 7)), Source(5, 9, (7,))))
    # ack_level jumped to the counter: a pending row is skipped by v0.3 readers
    assert "covers row 5" in " ".join(source_problems("s", before, Source(9, 9, (5, 6, 7))))
    assert "went back" in " ".join(source_problems("s", before, Source(3, 9, (5, 6, 7))))


def test_refusal_problems() -> None:
    case = NegativeCase(Path("payload_not_object.sql"), "data.payload_shape", "x")
    ran = Attempt("upgrade", None, False, False)
    assert problems(case, [ran]) == [
        "payload_not_object (data.payload_shape) upgrade: not refused, the broken database "
        "was migrated",
        "payload_not_object (data.payload_shape) upgrade: the database changed",
    ]
    vague = Attempt("upgrade", "MigrationError: failed", False, True)
    assert "without naming data.payload_shape" in problems(case, [vague])[0]
    assert problems(case, [Attempt("upgrade", "MigrationRefused: …", True, True)]) == []
    assert len(golden.negative_cases()) >= 10


# against the real server -------------------------------------------------------------------
@pytest.fixture(scope="module")
def fresh(pg_admin_dsn: str) -> Iterator[tuple[ScratchDatabases, catalog.Catalog]]:
    with ScratchDatabases(pg_admin_dsn, prefix="qgvs") as scratch:
        dsn = scratch.create()
        upgrade(dsn, progress=False)
        with connection(dsn) as conn:
            yield scratch, catalog.introspect(conn)


def _copy(tmp_path: Path, edits: dict[str, str]) -> SetFacts:
    return revisions.load(materialise(migrations_dir(), tmp_path / "migrations", edits))


def _judge(
    fresh: tuple[ScratchDatabases, catalog.Catalog], migrations: SetFacts, online: bool
) -> dict[str, verify_report.Check]:
    scratch, fresh_catalog = fresh
    result = verify.verify_fixture(
        golden.get("v0.3"),
        scratch,
        fresh_catalog,
        None,
        migrations,
        golden.head_catalog(),
        online_only=online,
        fail_fast=True,
    )
    return {c.name: c for c in result.checks}


def _edit(file: str, old: str, new: str) -> dict[str, str]:
    text = (SQL / file).read_text(encoding="utf-8")
    assert old in text, (file, old)
    return {f"sql/004/{file}": text.replace(old, new, 1)}


@pytest.mark.slow
def test_the_real_migration_set_passes_every_new_check(
    fresh: tuple[ScratchDatabases, catalog.Catalog],
) -> None:
    checks = _judge(fresh, revisions.packaged(), online=False)
    assert all(c.ok for c in checks.values()), {n: c.detail for n, c in checks.items() if not c.ok}
    assert {"rows", "contention", "refusals", "online"} <= set(checks)
    assert (
        "11 broken databases refused by upgrade and upgrade --online" in checks["refusals"].detail
    )


@pytest.mark.slow
def test_rows_sees_a_relocated_row_whose_created_at_became_now(
    fresh: tuple[ScratchDatabases, catalog.Catalog], tmp_path: Path
) -> None:
    mutant = _copy(tmp_path, _edit("03_relocate.sql", "       t.created_at\n", "       now()\n"))
    checks = _judge(fresh, mutant, online=False)
    assert checks["golden"].ok  # the state document cannot see it
    assert not checks["rows"].ok and "created_at" in checks["rows"].detail
    assert rows.NOW in checks["rows"].detail


@pytest.mark.slow
def test_the_online_check_compares_whole_rows_with_offline(
    fresh: tuple[ScratchDatabases, catalog.Catalog], tmp_path: Path
) -> None:
    edit = _edit("online/migrate.sql", "           n.created_at\n", "           now()\n")
    checks = _judge(fresh, _copy(tmp_path, edit), online=True)
    assert not checks["online"].ok and "rows: tasks" in checks["online"].detail
    assert "created_at" in checks["online"].detail


@pytest.mark.slow
def test_refusals_sees_the_guard_switched_off(
    fresh: tuple[ScratchDatabases, catalog.Catalog], tmp_path: Path
) -> None:
    """Without a `00_` step the runner never runs the guard (steps.apply guards after it)."""
    locks_sql = (SQL / "00_locks.sql").read_text(encoding="utf-8")
    plan_sql = (SQL / "01_plan.sql").read_text(encoding="utf-8")
    root = materialise(
        migrations_dir(), tmp_path / "m", {"sql/004/01_plan.sql": locks_sql + "\n" + plan_sql}
    )
    (root / "sql/004/00_locks.sql").unlink()
    manifest.write(root)
    checks = _judge(fresh, revisions.load(root), online=False)
    assert not checks["refusals"].ok
    assert "payload_without_run_id (data.payload_shape) upgrade: not refused" in (
        checks["refusals"].detail
    )


@pytest.mark.slow
def test_contention_sees_a_step_runner_without_lock_timeout(
    fresh: tuple[ScratchDatabases, catalog.Catalog], tmp_path: Path
) -> None:
    edit = _edit(
        "00_locks.sql",
        "LOCK TABLE task_queues",
        "SET LOCAL lock_timeout = 0;\nLOCK TABLE task_queues",
    )
    checks = _judge(fresh, _copy(tmp_path, edit), online=False)
    assert not checks["contention"].ok
    assert "did not give up with LockTimeout" in checks["contention"].detail
    assert "the database changed" in checks["contention"].detail


@pytest.mark.slow
@pytest.mark.parametrize(
    ("file", "old", "new", "seen"),
    [
        (
            "online/expand.sql",
            "CREATE INDEX CONCURRENTLY IF NOT EXISTS",
            "CREATE INDEX IF NOT EXISTS",
            "takes SHARE on tasks (ceiling SHARE UPDATE EXCLUSIVE)",
        ),
        (
            "online/rollout.sql",
            "DROP INDEX CONCURRENTLY IF EXISTS",
            "DROP INDEX IF EXISTS",
            "takes ACCESS EXCLUSIVE on tasks (ceiling SHARE UPDATE EXCLUSIVE)",
        ),
    ],
    ids=["build", "drop"],
)
def test_the_marker_index_without_concurrently_breaks_the_ceiling(
    fresh: tuple[ScratchDatabases, catalog.Catalog],
    tmp_path: Path,
    file: str,
    old: str,
    new: str,
    seen: str,
) -> None:
    checks = _judge(fresh, _copy(tmp_path, _edit(file, old, new)), online=True)
    assert not checks["online"].ok
    assert "LockBudgetExceeded" in checks["online"].detail and seen in checks["online"].detail


#: docs/mutation.md's ten online survivors before this work, and what now sees each
SURVIVORS = {
    "f842a6ceae3b": "expand refused while another index (not the marker) was being built",
    "bef2f7eddc96": "expand refused while another index (not the marker) was being built",
    "5905e2428d4e": "(ids that are gone are done)",
    "13a170ee60d0": "(ids that are gone are done)",
    "8d2721e92daa": "a v0.3 reader would skip it",
    "6e124eb40dfa": "rows of @auto queues carry a version directive",
    "74f4eabcf7af": "rows of @auto queues carry a version directive",
    "801f483e646f": "rows of @auto queues carry a version directive",
    "15682165b1fc": "a directive batch does not find its rows through the marker index",
    "ce0b539d0bc6": "abort after an interrupted expand failed",
    # not a survivor then: killed by the progress check's timing, which the observer's
    # reads between batches made too loose on a loaded machine; now by a state
    "ab4085158b35": "before migrate the rollout record counts",
}


@pytest.mark.slow
@pytest.mark.parametrize("mutant_id", sorted(SURVIVORS))
def test_the_former_online_survivors_are_killed(
    fresh: tuple[ScratchDatabases, catalog.Catalog], tmp_path: Path, mutant_id: str
) -> None:
    (mutant,) = [m for m in generate(revisions.packaged(), "004") if m.id == mutant_id]
    checks = _judge(fresh, _copy(tmp_path, {mutant.file: mutant.text}), online=True)
    assert not checks["online"].ok
    assert SURVIVORS[mutant_id] in checks["online"].detail, checks["online"].detail
