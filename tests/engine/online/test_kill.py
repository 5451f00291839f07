"""SIGKILL of `queueguard upgrade --migrations DIR --online` in the middle of a concurrent
index build: the killed runner's backend goes on (here: waiting for an older snapshot, as a
build does behind a long transaction) holding the runner lock; the rerun ends it (its runner
is gone), rebuilds the invalid leftover and ends where the plain upgrade ends."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest

from queueguard import sets
from queueguard.engine.apply.runner import upgrade
from queueguard.engine.online import proof

SET = {
    "V1__big.sql": "CREATE TABLE big (id bigint PRIMARY KEY, a text, b int);\n"
    "INSERT INTO big SELECT g, md5(g::text), g % 1000 FROM generate_series(1, 5000) g;",
    "V2__index.sql": "CREATE INDEX big_a ON big (a, b);\nCREATE TABLE after_it (id int);",
}


def _cli(dsn: str, folder: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [
            sys.executable, "-c", "from queueguard.cli import main; raise SystemExit(main())",
            "upgrade", "--migrations", str(folder), "--dsn", dsn, "--online",
            "--max-lock", "0ms", "--sample-rows", "2000",
            # the build's wait for the old snapshot counts against lock_timeout: long enough
            # that the killed runner's backend is still waiting when the rerun starts
            "--lock-timeout", "60s",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )  # fmt: skip


@pytest.mark.slow
def test_a_killed_runner_mid_build_is_ended_and_the_rerun_completes(
    make_db: Callable[..., str], tmp_path: Path
) -> None:
    folder = tmp_path / "set"
    folder.mkdir()
    for name, text in SET.items():
        (folder / name).write_text(text)
    mset = sets.load(folder)
    plain, online = make_db(), make_db()
    for dsn in (plain, online):
        upgrade(mset, dsn, to="1")
    upgrade(mset, plain)
    with psycopg.connect(online, autocommit=True) as conn, psycopg.connect(online) as old:
        old.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        old.execute("SELECT count(*) FROM big").fetchone()  # a snapshot the build waits for
        runner = _cli(online, folder)
        deadline = time.monotonic() + 120
        building = None
        while building is None and time.monotonic() < deadline and runner.poll() is None:
            building = conn.execute(
                "SELECT p.pid FROM pg_stat_progress_create_index p "
                "JOIN pg_stat_activity a USING (pid) "
                "WHERE a.application_name LIKE 'queueguard-upgrade online %' "
                "AND p.datname = current_database()"  # not the proof's scratch copies
            ).fetchone()
            time.sleep(0.01)
        assert building is not None, runner.communicate()
        os.kill(runner.pid, signal.SIGKILL)
        runner.wait()
        time.sleep(0.2)
        # the backend outlives its runner, still waiting (unless it wrote to the dead client
        # first: a loaded machine can catch the build in a phase that does)
        orphaned = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE pid = %s", (building[0],)
        ).fetchone() == (1,)
        rerun = _cli(online, folder)
        while conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE pid = %s", (building[0],)
        ).fetchone() == (1,):
            assert rerun.poll() is None, rerun.communicate()
            time.sleep(0.02)
        old.rollback()  # the long transaction ends: the rebuilt index can be built
    _, err = rerun.communicate(timeout=180)
    assert rerun.returncode == 0, err.decode()
    assert not orphaned or f"ended backend {building[0]}".encode() in err
    assert proof.dump_differences(proof.schema_dump(plain), proof.schema_dump(online)) == []
    assert proof.row_differences(plain, online, bookkeeping=mset.bookkeeping) == []
