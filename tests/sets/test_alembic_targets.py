"""`--to` takes every target Alembic's `upgrade` takes, placed as Alembic places it: relative
(`+N`, `BRANCH@+N`, `REV+N`), branch heads, `heads`, a revision; from old states of a two-base
set across its merge points, queueguard's upgrade leaves what `command.upgrade` leaves on a
twin database, and refuses what Alembic refuses, naming Alembic's reason."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest
from alembic import command
from alembic.util import CommandError

from queueguard.cli import main
from queueguard.engine import catalog
from queueguard.sets.alembic_config import config
from tests.sets import two_bases

CASES = [
    (("m03a", "a01"), "main@+2"),
    (("m03a", "a01"), "main@+1"),
    (("m03a", "a01"), "aux@+1"),
    (("m03a", "a01"), "heads"),
    (("m03a", "a01"), "main@head"),
    (("m03a", "a01"), "m07"),
    (("m03a", "a01"), "m06c"),
    (("m03a", "a01"), "+1"),  # Alembic: ambiguous from two heads
    (("m06c", "a02"), "main@+3"),  # past the re-merge of a fork merged before
    (("m06a",), "m05+2"),
    (("m05",), "+2"),
    ((), "aux@+1"),
    ((), "main@+3"),
    (("m10", "a02"), "main@+1"),  # past the head: Alembic refuses
    (("m03a",), "nope"),
]


def _state(dsn: str) -> list[str]:
    with psycopg.connect(dsn) as conn:
        found = conn.execute("SELECT to_regclass('alembic_version')").fetchone()
        if found == (None,):
            return []
        return sorted(r[0] for r in conn.execute("SELECT version_num FROM alembic_version"))


@pytest.mark.parametrize(("start", "to"), CASES)
def test_to_goes_where_alembics_upgrade_goes(
    tmp_path: Path,
    make_db: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
    start: tuple[str, ...],
    to: str,
) -> None:
    root = two_bases.write(tmp_path / "p", ";")
    ours, theirs = make_db(), make_db()
    for dsn in (ours, theirs):
        for step in start:
            command.upgrade(config(root, dsn), step)
    try:
        command.upgrade(config(root, theirs), to)
        refused = None
    except CommandError as exc:
        refused = str(exc)
    code = main(["upgrade", "--migrations", str(root), "--dsn", ours, "--to", to, "--json"])
    out, err = capsys.readouterr()
    if refused is not None:
        assert code == 2 and refused in err, (refused, err)
        assert _state(ours) == sorted(start)
        return
    assert code == 0, err
    assert _state(ours) == _state(theirs)
    assert json.loads(out)["afterHeads"] == _state(theirs)
    assert not catalog.differences(catalog.introspect(theirs), catalog.introspect(ours))


def test_plan_places_a_relative_target_as_upgrade_does(
    tmp_path: Path, make_db: Callable[..., str], capsys: pytest.CaptureFixture[str]
) -> None:
    root = two_bases.write(tmp_path / "p", ";")
    dsn = make_db()
    for step in ("m03a", "a01"):
        command.upgrade(config(root, dsn), step)
    code = main(["plan", "--migrations", str(root), "--dsn", dsn, "--to", "main@+2", "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    doc = json.loads(out)
    assert [r["id"] for r in doc["revisions"]] == ["m03b", "m04", "m05"]
    assert _state(dsn) == ["a01", "m03a"]  # plan is read only


def test_fleet_refuses_a_relative_target(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each target of a fleet is somewhere else: a count from "where it is" names a
    different revision on each, so fleet takes absolute targets only."""
    root = two_bases.write(tmp_path / "p", ";")
    targets = tmp_path / "fleet.toml"
    targets.write_text('[[targets]]\nname = "a"\ndsn = "postgresql:///nowhere"\n')
    code = main(["fleet", "plan", "--targets", str(targets), "--migrations", str(root),
                 "--to", "main@+1"])  # fmt: skip
    _, err = capsys.readouterr()
    assert code == 2 and "counts from where a database is" in err
