"""Standby awareness, on a real streaming hot standby (a private primary and a replica built
with pg_basebackup from the embedded binaries): preflight says where it ran and how far behind
the standby is; every command that writes refuses the standby before touching anything,
naming its primary; after an upgrade on the primary the standby holds the same data."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.topology.standby import PrimaryWithStandby
from queueguard import cli
from queueguard.engine.checksums import table_checksums
from queueguard.pg.connect import connection
from queueguard.queue_schema import golden

DB = "app"


@pytest.fixture(scope="module")
def pair() -> Iterator[PrimaryWithStandby]:
    with PrimaryWithStandby() as running:
        with connection(running.primary_dsn(), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {DB}")
        golden.load(golden.get("v0.3"), running.primary_dsn(DB))
        running.wait_replayed()
        yield running


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_preflight_on_the_standby_says_so_with_its_lag(
    pair: PrimaryWithStandby, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _run(capsys, "preflight", "--dsn", pair.standby_dsn(DB), "--json")
    doc = json.loads(out)
    assert code == 0 and doc["revision"] == "003"
    (standby,) = [f for f in doc["findings"] if f["code"] == "runtime.standby"]
    sample = standby["samples"][0]
    assert sample["primary"] == f"{pair.primary.socket_dir}:{pair.primary.port}"
    assert sample["replayLagSeconds"] is not None and sample["replayLagSeconds"] >= 0
    assert "run preflight on the primary" in standby["message"]
    code, out, _ = _run(capsys, "preflight", "--dsn", pair.primary_dsn(DB), "--json")
    assert "runtime.standby" not in [f["code"] for f in json.loads(out)["findings"]]


@pytest.mark.parametrize(
    "argv",
    [
        ["upgrade"],
        ["fixtures", "load", "v0.3"],
        ["snapshot", "import", "fixtures/snapshots/v3_golden.json"],
    ],
    ids=["upgrade", "fixtures-load", "snapshot-import"],
)
def test_writing_commands_refuse_the_standby_naming_the_primary(
    pair: PrimaryWithStandby, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    standby = pair.standby_dsn(DB)
    before = table_checksums_of(standby)
    argv = [a if not a.startswith("fixtures/") else str(_root() / a) for a in argv]
    code, _, err = _run(capsys, *argv, "--dsn", standby)
    assert code == 2, err
    assert "the target is a hot standby (in recovery, read-only)" in err
    assert f"{pair.primary.socket_dir}:{pair.primary.port}" in err
    assert "Traceback" not in err
    assert table_checksums_of(standby) == before


def test_after_an_upgrade_on_the_primary_the_standby_holds_the_same_data(
    pair: PrimaryWithStandby, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = _run(capsys, "upgrade", "--dsn", pair.primary_dsn(DB))
    assert code == 0, err
    pair.wait_replayed()
    primary, standby = (
        table_checksums_of(pair.primary_dsn(DB)),
        table_checksums_of(pair.standby_dsn(DB)),
    )
    assert primary == standby
    assert "queueguard_migrations" in primary  # the upgraded schema, replicated


def table_checksums_of(dsn: str) -> dict[str, str]:
    with connection(dsn) as conn:
        return table_checksums(conn)


def _root() -> Path:
    return Path(__file__).resolve().parents[2]
