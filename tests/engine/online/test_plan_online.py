"""`plan --online`: the online bill — each statement over the budget with its forms, the
longest blocking lock they take, the extra disk and the time — in text, JSON and the
pull-request comment; the target is only read."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable

import psycopg
import pytest

from queueguard import sets
from queueguard.cli import main
from queueguard.engine.apply.runner import upgrade
from tests.engine.online.test_temporal_online import DATA, FILL


class _Writer:
    """Inserts a visit a few hundred times a second, each in its own transaction."""

    def __init__(self, dsn: str) -> None:
        self.dsn, self.stop = dsn, threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> _Writer:
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop.set()
        self.thread.join()

    def _run(self) -> None:
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            n = 10_000
            while not self.stop.is_set():
                n += 1
                conn.execute(
                    "INSERT INTO visits (namespace_id, run_id, start_time, status) "
                    "VALUES ('ns1', %s, now(), 1)",
                    (f"w{n}",),
                )
                time.sleep(0.003)


def test_plan_online_bills_each_statement_over_the_budget_in_its_forms(
    make_db: Callable[..., str], capsys: pytest.CaptureFixture[str]
) -> None:
    mset = sets.load(DATA)
    dsn = make_db()
    upgrade(mset, dsn, to="1.2")
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(FILL)
        conn.execute("VACUUM ANALYZE")
    args = ["plan", "--migrations", str(DATA), "--dsn", dsn, "--online", "--max-lock", "0ms"]
    with _Writer(dsn):  # the writers' rate prices the rebuild's change log
        assert main([*args, "--sample-rows", "500", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    forms = {
        " ".join(r["sql"].split()[3:5]): [f["kind"] for f in r["forms"]] for r in doc["online"]
    }
    assert forms == {"ALTER COLUMN": ["rebuild"], "ADD CONSTRAINT": ["not-valid"]}
    rebuild = next(r for r in doc["online"] if r["forms"][0]["kind"] == "rebuild")
    assert rebuild["extra_disk_bytes"] > 0 and "swap" in rebuild["forms"][0]["longest_lock"]
    assert rebuild["change_log_wal_bytes"] > 0
    assert rebuild["wal_bytes"] > rebuild["change_log_wal_bytes"]  # the copy's own WAL too
    check = next(r for r in doc["online"] if r["forms"][0]["kind"] == "not-valid")
    assert check["change_log_wal_bytes"] == 0 and check["wal_bytes"] is not None
    assert main([*args, "--sample-rows", "500"]) == 0
    text = capsys.readouterr().out
    assert "online: 2 statement(s) over the 0 ms lock budget" in text
    assert "rebuild on visits" in text
    assert main([*args, "--sample-rows", "500", "--output", "markdown"]) == 0
    assert "online: rebuild" in capsys.readouterr().out
    with psycopg.connect(dsn) as conn:  # only read
        assert conn.execute("SELECT curr_version FROM schema_version").fetchone() == ("1.2",)
