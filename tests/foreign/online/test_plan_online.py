"""`plan --online`: the online bill — each statement over the budget with its forms, the
longest blocking lock they take, the extra disk and the time — in text, JSON and the
pull-request comment; the target is only read."""

from __future__ import annotations

import json
from collections.abc import Callable

import psycopg
import pytest

from queueguard import sets
from queueguard.cli import main
from queueguard.upgrade.foreign.runner import upgrade
from tests.foreign.online.test_temporal_online import DATA, FILL


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
    assert main([*args, "--sample-rows", "500", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    forms = {
        " ".join(r["sql"].split()[3:5]): [f["kind"] for f in r["forms"]] for r in doc["online"]
    }
    assert forms == {"ALTER COLUMN": ["rebuild"], "ADD CONSTRAINT": ["not-valid"]}
    rebuild = next(r for r in doc["online"] if r["forms"][0]["kind"] == "rebuild")
    assert rebuild["extra_disk_bytes"] > 0 and "swap" in rebuild["forms"][0]["longest_lock"]
    assert main([*args, "--sample-rows", "500"]) == 0
    text = capsys.readouterr().out
    assert "online: 2 statement(s) over the 0 ms lock budget" in text
    assert "rebuild on visits" in text
    assert main([*args, "--sample-rows", "500", "--output", "markdown"]) == 0
    assert "online: rebuild" in capsys.readouterr().out
    with psycopg.connect(dsn) as conn:  # only read
        assert conn.execute("SELECT curr_version FROM schema_version").fetchone() == ("1.2",)
