"""`fleet` on an Alembic set of two independent bases: a target whose version rows name
revisions the set does not hold is recorded failed (never done), and `fleet verify` says a
state of several heads as `plan`, `upgrade` and `status` do (null, and the lists)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from alembic import command

from queueguard.sets.alembic_config import config
from tests.fleet.conftest import Fleet
from tests.sets import two_bases
from tests.sets.test_alembic_ini import _rows


@pytest.mark.slow
def test_fleet_records_a_target_at_unknown_revisions_failed(
    tmp_path: Path, fleet: Fleet, capsys: pytest.CaptureFixture[str]
) -> None:
    root = two_bases.write(tmp_path / "p", ";")
    known, unknown = fleet.database("known"), fleet.database("unknown")
    for dsn in (known, unknown):
        command.upgrade(config(root, dsn), "m02")
    _rows(unknown, "deadbeef0000")
    body = f'[[targets]]\nname = "known"\ndsn = "{known}"\n'
    body += f'[[targets]]\nname = "unknown"\ndsn = "{unknown}"\n'
    path = fleet.root / "fleet.toml"
    path.write_text(body)
    code, out, _ = fleet.cli(
        capsys, "upgrade", "--targets", str(path), "--migrations", str(root), "--json"
    )
    assert code != 0, out
    board = fleet.board()
    assert board["known"][0] == "done"
    assert board["unknown"][0] == "failed" and "deadbeef0000" in board["unknown"][3]
    assert "deadbeef0000" in out


@pytest.mark.slow
def test_fleet_verify_says_several_heads_as_lists(
    tmp_path: Path, fleet: Fleet, capsys: pytest.CaptureFixture[str]
) -> None:
    root = two_bases.write(tmp_path / "p", ";")
    dsn = fleet.database("one")
    command.upgrade(config(root, dsn), "heads")
    path = fleet.root / "fleet.toml"
    path.write_text(f'[[targets]]\nname = "one"\ndsn = "{dsn}"\n')
    code, out, _ = fleet.cli(
        capsys, "verify", "--targets", str(path), "--migrations", str(root), "--json"
    )
    doc = json.loads(out)
    assert code == 0 and (doc["head"], doc["heads"]) == (None, ["a02", "m10"])
    target = doc["targets"][0]
    assert (target["revision"], target["currentHeads"]) == (None, ["a02", "m10"])
