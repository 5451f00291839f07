"""`fleet upgrade --online`: the statements over the budget in online forms, decided and
proven once per group of targets (same revision, same catalog) on the group's largest,
each target ending as the plain upgrade leaves its twin."""

from __future__ import annotations

import pytest

from queueguard.cli import main
from queueguard.engine import catalog
from tests.fleet.conftest import Fleet, ledger
from tests.fleet.test_fleet_plan import REWRITE, _at_0001

pytestmark = pytest.mark.slow


def test_online_forms_are_proven_once_per_group_and_each_target_ends_as_plain(
    fleet: Fleet, capsys: pytest.CaptureFixture[str]
) -> None:
    fleet.write_set(REWRITE)
    sizes = {"small": 300, "middle": 3_000, "large": 20_000}
    for name, rows in sizes.items():
        _at_0001(fleet, fleet.database(name), rows)
        _at_0001(fleet, fleet.database(f"{name}_plain"), rows)
    path = fleet.targets_file(
        "".join(f'[[targets]]\nname = "{n}"\ndsn = "{fleet.dsn(n)}"\n' for n in sizes)
    )
    code, _, err = fleet.cli(
        capsys, "upgrade", "--targets", str(path), "--online", "--max-lock", "1ms"
    )
    assert code == 0, err
    assert err.count("online: preparing the forms of large's group") == 1, err
    for name in sizes:
        plain = fleet.dsn(f"{name}_plain")
        assert main(["upgrade", "--migrations", str(fleet.set_dir), "--dsn", plain]) == 0
        capsys.readouterr()
        assert ledger(fleet.dsn(name)) == ["0001", "0002"]
        assert catalog.fingerprint(fleet.dsn(name)) == catalog.fingerprint(plain)
        rows = "SELECT id, note FROM items ORDER BY id"
        assert fleet.sql(fleet.dsn(name), rows) == fleet.sql(plain, rows)


def test_online_refuses_schema_targets_before_anything_is_claimed(
    fleet: Fleet, capsys: pytest.CaptureFixture[str]
) -> None:
    shared = fleet.schemas("shared", ["tenant_a"])
    path = fleet.targets_file(f'[[targets]]\nname = "a"\ndsn = "{shared}"\nschema = "tenant_a"\n')
    code, _, err = fleet.cli(capsys, "upgrade", "--targets", str(path), "--online")
    assert code == 2 and "needs database targets" in err
    assert fleet.sql(fleet.control, "SELECT to_regclass('queueguard_fleet.runs')") == [(None,)]
