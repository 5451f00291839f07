"""The upgrade tools through a real PgBouncer in transaction-pooling mode (Debian's package;
the `pgbouncer` fixture skips with its reason where it is missing, CI requires it)."""

from __future__ import annotations

import json

import pytest

from bench.topology.pgbouncer import PgBouncer
from bench.topology.runner_rounds import run_round
from queueguard import cli
from queueguard.pg.scratch import ScratchDatabases, dbname_of
from queueguard.queue_schema import golden

ROUNDS = [2, 3, 2, 3, 2]  # runners per round (the bench runs 20+ rounds)


@pytest.mark.parametrize(
    "runners", ROUNDS, ids=[f"round{i}-{n}runners" for i, n in enumerate(ROUNDS)]
)
def test_concurrent_runners_through_the_pooler_apply_each_revision_once(
    pg_admin_dsn: str, pgbouncer: PgBouncer, runners: int
) -> None:
    result = run_round(pg_admin_dsn, pgbouncer, runners)
    assert result.problems("003") == []
    assert result.client_transactions > 0  # the pooler was shared while the runners ran
    # a runner that lost the race says so (or, started late, finds the database at head)
    losers = [r for r in result.reports if not r["applied"]]
    assert all(r["skipped"] == ["004"] or r["before"] == "004" for r in losers), result.reports


def test_preflight_status_and_upgrade_through_the_pooler(
    pg_admin_dsn: str, pgbouncer: PgBouncer, capsys: pytest.CaptureFixture[str]
) -> None:
    with ScratchDatabases(pg_admin_dsn) as databases:
        direct = databases.create()
        golden.load(golden.get("v0.3"), direct)
        pooled = pgbouncer.dsn(dbname_of(direct))
        assert cli.main(["preflight", "--dsn", pooled, "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["revision"] == "003"
        assert cli.main(["upgrade", "--dsn", pooled]) == 0
        capsys.readouterr()
        assert cli.main(["status", "--dsn", pooled, "--json"]) == 0
        doc = json.loads(capsys.readouterr().out)
        assert (doc["revision"], doc["protocol"], doc["drift"]) == ("004", {"min": 4, "max": 4}, [])


def test_the_older_host_check_says_it_is_blind_through_a_pooler(
    pg_admin_dsn: str, pgbouncer: PgBouncer, capsys: pytest.CaptureFixture[str]
) -> None:
    with ScratchDatabases(pg_admin_dsn) as databases:
        direct = databases.create()
        golden.load(golden.get("v0.3"), direct)
        pooled = pgbouncer.dsn(dbname_of(direct))

        def codes(*dsn_and_flags: str) -> list[str]:
            assert cli.main(["preflight", "--dsn", *dsn_and_flags, "--json"]) == 0
            return [f["code"] for f in json.loads(capsys.readouterr().out)["findings"]]

        assert "runtime.pooled" in codes(pooled)
        assert "runtime.pooled" not in codes(direct)
        assert "runtime.pooled" in codes(direct, "--pooled")  # the operator may say so
        assert cli.main(["upgrade", "--dsn", pooled, "--json"]) == 0
        out, err = capsys.readouterr()
        (warning,) = json.loads(out)["warnings"]
        assert "an idle host is invisible" in warning and "the fence" in warning
        assert "queueguard: warning: through a pooler" in err
