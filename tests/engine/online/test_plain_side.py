"""The proof's plain side, started as soon as the sample is built: it runs beside `plan`
for a set of SQL revisions, its end state is what the proof compares (the proof still
passes and the target ends where a plain upgrade ends), and it is stopped, its database
dropped, when nothing goes online or `plan` fails."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest

from queueguard import sets
from queueguard.engine.apply import runner
from queueguard.engine.online import plain_side, proof
from queueguard.engine.online import upgrade as online_upgrade
from queueguard.engine.online.upgrade import upgrade_online
from queueguard.engine.plan import planner
from queueguard.pg import scratch

SET = {
    "V1__tables.sql": "CREATE TABLE notes (id bigint PRIMARY KEY, body text);"
    "INSERT INTO notes SELECT g, 'n' || g FROM generate_series(1, 4000) g;",
    "V2__index.sql": "CREATE INDEX notes_body ON notes (body);"
    "ALTER TABLE notes ADD CONSTRAINT notes_id_positive CHECK (id > 0);",
}


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    for name, text in SET.items():
        (tmp_path / name).write_text(text)
    return tmp_path


def _exists(admin: str, dsn: str) -> bool:
    with psycopg.connect(admin) as conn:
        query = "SELECT count(*) FROM pg_database WHERE datname = %s"
        row = conn.execute(query, (scratch.dbname_of(dsn),)).fetchone()
        return row == (1,)


@pytest.fixture
def stopped(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The DSN of each plain side stopped (`discard`), as it is stopped."""
    found: list[str] = []
    discard = plain_side.PlainSide.discard

    def recorded(side: plain_side.PlainSide) -> None:
        found.append(side.dsn)
        discard(side)

    monkeypatch.setattr(plain_side.PlainSide, "discard", recorded)
    return found


class Timeline:
    """When `plan` and each plain upgrade of a scratch copy began and ended."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, target: str) -> None:
        self.events: list[tuple[str, float, float]] = []
        self.target = target
        plan, upgrade = planner.plan, runner.upgrade

        def timed_plan(*args: Any, **kwargs: Any) -> Any:
            return self._timed("plan", plan, *args, **kwargs)

        def timed_upgrade(mset: Any, dsn: str, *args: Any, **kwargs: Any) -> Any:
            plain_copy = dsn != self.target and kwargs.get("online") is None
            name = "plain side" if plain_copy else "other upgrade"
            return self._timed(name, upgrade, mset, dsn, *args, **kwargs)

        monkeypatch.setattr(online_upgrade.planner, "plan", timed_plan)
        monkeypatch.setattr(plain_side.runner, "upgrade", timed_upgrade)

    def _timed(self, name: str, work: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        began = time.perf_counter()
        try:
            return work(*args, **kwargs)
        finally:
            self.events.append((name, began, time.perf_counter()))

    def first(self, name: str) -> tuple[float, float]:
        return next((b, e) for n, b, e in self.events if n == name)


def test_the_plain_side_runs_beside_plan_and_the_proof_holds(
    make_db: Callable[..., str], folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mset = sets.load(folder)
    plain, online = make_db(), make_db()
    for dsn in (plain, online):
        runner.upgrade(mset, dsn, to="1")
    runner.upgrade(mset, plain)
    timeline = Timeline(monkeypatch, online)
    result = upgrade_online(mset, online, budget_ms=0.0, sample_rows=1000)
    assert result.proved and result.report is not None and result.report.after == "2"
    plan_began, plan_ended = timeline.first("plan")
    side_began, _ = timeline.first("plain side")
    # started with the sample built, before plan ended: the two overlap
    assert side_began < plan_ended, timeline.events
    assert abs(side_began - plan_began) < plan_ended - plan_began
    assert proof.dump_differences(proof.schema_dump(plain), proof.schema_dump(online)) == []
    assert proof.row_differences(plain, online, bookkeeping=mset.bookkeeping) == []


def test_the_plain_side_is_stopped_when_nothing_goes_online(
    make_db: Callable[..., str], folder: Path, pg_admin_dsn: str, stopped: list[str]
) -> None:
    mset = sets.load(folder)
    target = make_db()
    runner.upgrade(mset, target, to="1")
    # every statement under a budget of an hour: no form, nothing to prove
    result = upgrade_online(mset, target, budget_ms=3_600_000.0, sample_rows=1000)
    assert not result.proved and result.decisions == []
    assert result.report is not None and result.report.after == "2"
    assert len(stopped) == 1 and not _exists(pg_admin_dsn, stopped[0])


def test_a_plan_that_fails_stops_the_plain_side_and_leaves_no_scratch_database(
    make_db: Callable[..., str],
    folder: Path,
    pg_admin_dsn: str,
    monkeypatch: pytest.MonkeyPatch,
    stopped: list[str],
) -> None:
    mset = sets.load(folder)
    target = make_db()
    runner.upgrade(mset, target, to="1")

    def failing_plan(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("plan failed")

    monkeypatch.setattr(online_upgrade.planner, "plan", failing_plan)
    with pytest.raises(RuntimeError, match="plan failed"):
        upgrade_online(mset, target, budget_ms=0.0, sample_rows=1000)
    assert len(stopped) == 1 and not _exists(pg_admin_dsn, stopped[0])
    with psycopg.connect(target) as conn:  # the target untouched: still at 1
        assert conn.execute("SELECT to_regclass('notes_body')").fetchone() == (None,)
