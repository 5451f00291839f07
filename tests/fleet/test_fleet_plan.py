"""`fleet plan`: read only on every target; one trace per group of targets at the same
revision and catalog (on the group's largest), every target priced at its own sizes; the
waves' predicted time; every target listed, one that cannot be priced with its reason."""

from __future__ import annotations

import hashlib
import json

import pytest

from queueguard.pg.dsn import with_params
from tests.fleet.conftest import Fleet, ledger

#: a rewrite (the type change) and an index build: both cost what the table holds
REWRITE = {
    "0001_items.sql": "CREATE TABLE items (id bigint PRIMARY KEY, note varchar(20));\n",
    "0002_note.sql": "ALTER TABLE items ALTER COLUMN note TYPE varchar(40) USING note || '';\n"
    "CREATE INDEX items_note_idx ON items (note);\n",
}
LEDGER = (
    "CREATE TABLE queueguard_sqldir_ledger (revision text PRIMARY KEY, checksum text NOT NULL, "
    "applied_at timestamptz NOT NULL DEFAULT now())"
)
ROWS = {"small": 200, "middle": 5_000, "large": 60_000}


def _at_0001(fleet: Fleet, dsn: str, rows: int) -> None:
    """0001 applied (its ledger row too) and `rows` rows in its table."""
    checksum = hashlib.sha256(REWRITE["0001_items.sql"].encode()).hexdigest()
    fleet.sql(dsn, REWRITE["0001_items.sql"] + LEDGER)
    fleet.sql(dsn, "INSERT INTO queueguard_sqldir_ledger (revision, checksum) "
              f"VALUES ('0001', '{checksum}')")  # fmt: skip
    fleet.sql(dsn, f"INSERT INTO items SELECT g, 'n' || g FROM generate_series(1, {rows}) g;"
              "ANALYZE items")  # fmt: skip


def test_each_target_is_priced_at_its_own_size_from_one_trace(
    fleet: Fleet, capsys: pytest.CaptureFixture[str]
) -> None:
    fleet.write_set(REWRITE)
    for name, rows in ROWS.items():
        _at_0001(fleet, fleet.database(name), rows)
    shared = fleet.schemas("shared", ["tenant_a"])
    path = fleet.targets_file(
        fleet.discover_databases(like="%l%")  # middle, large and shared
        + f'[[targets]]\nname = "small"\ndsn = "{fleet.dsn("small")}"\n'
        + f'[[targets]]\nname = "tenant"\ndsn = "{shared}"\nschema = "tenant_a"\n'
        + '[[waves]]\nname = "all"\nparallel = 2\n'
    )
    code, out, err = fleet.cli(capsys, "plan", "--targets", str(path), "--json")
    assert out, err
    doc = json.loads(out)
    by_name = {t["name"]: t for t in doc["targets"]}
    assert code == 0, err
    assert by_name["tenant"]["error"] is None and by_name["tenant"]["pending"] == ["0001", "0002"]
    small, middle, large = (by_name[n] for n in ("small", f"{fleet.prefix}_middle",
                                                  f"{fleet.prefix}_large"))  # fmt: skip
    assert {t["representative"] for t in (small, middle, large)} == {f"{fleet.prefix}_large"}
    assert small["estimateMs"] < middle["estimateMs"] < large["estimateMs"]
    assert large["tables"]["items"]["rows"] == ROWS["large"]
    assert doc["predictedMs"] >= large["estimateMs"]
    # each target's time in the run: alone (its statements and the upgrade's own overhead,
    # timed on copies of the sample), stretched by the targets of its wave beside it
    for t in (small, middle, large):
        assert t["estimateMs"] >= t["aloneMs"] >= t["overheadMs"] >= 0
    # read only: nothing applied anywhere
    for name in ROWS:
        assert ledger(fleet.dsn(name)) == ["0001"]

    path = fleet.targets_file(
        "".join(f'[[targets]]\nname = "{n}"\ndsn = "{fleet.dsn(n)}"\n' for n in ROWS),
        name="databases.toml",
    )
    code, out, _ = fleet.cli(capsys, "plan", "--targets", str(path), "--json")
    assert code == 0 and json.loads(out)["ok"]
    code, out, _ = fleet.cli(capsys, "plan", "--targets", str(path), "--max-lock", "1ms", "--json")
    doc = json.loads(out)
    assert code == 1
    assert "large" in doc["refusedWithoutOnline"]
    over = {t["name"]: t["over"] for t in doc["targets"]}["large"]
    assert over and over[0]["sql"].startswith("ALTER TABLE items ALTER COLUMN note")


def test_upgrade_with_max_lock_prices_first_and_refuses_a_target_over_the_budget(
    fleet: Fleet, capsys: pytest.CaptureFixture[str]
) -> None:
    """fleet upgrade --max-lock: fleet plan's predicted time is stored for every target; a
    target with a statement over the budget fails at its claim with nothing run."""
    fleet.write_set(REWRITE)
    for name, rows in (("small", 100), ("large", 60_000)):
        _at_0001(fleet, fleet.database(name), rows)
    path = fleet.targets_file(
        fleet.discover_databases() + '[[waves]]\nname = "all"\non_error = "isolate"\n'
    )
    code, _, err = fleet.cli(capsys, "upgrade", "--targets", str(path), "--max-lock", "1ms")
    assert code == 1
    board = fleet.board()
    for name in ("small", "large"):
        state, _, _, error = board[f"{fleet.prefix}_{name}"]
        assert state == "failed" and "over --max-lock 1 ms" in error, error
        assert ledger(fleet.dsn(name)) == ["0001"]  # nothing was run
    predicted = fleet.sql(fleet.control, "SELECT name, predicted_ms FROM queueguard_fleet.targets "
                          "WHERE run_id = (SELECT max(id) FROM queueguard_fleet.runs)")  # fmt: skip
    assert all(ms is not None and ms >= 0 for _, ms in predicted)
    code, _, err = fleet.cli(capsys, "upgrade", "--targets", str(path), "--max-lock", "10m")
    assert code == 0, err
    assert ledger(fleet.dsn("large")) == ["0001", "0002"]


def test_schema_targets_are_priced_at_their_own_schemas_sizes_neighbours_left_out(
    fleet: Fleet, capsys: pytest.CaptureFixture[str]
) -> None:
    """Tenants of one database: each read and traced as its sessions run (its schema alone on
    the path), traced once on the largest tenant's sample, which copies neither its
    neighbours nor their rows; every tenant priced at its own size; nothing written."""
    fleet.write_set(REWRITE)
    # the largest not first by name: were the neighbours counted, every tenant's size would
    # be the database's, and the first would be picked
    tenants = {"tenant_a": 300, "tenant_b": 40_000, "tenant_c": 4_000}
    dsn = fleet.schemas("tenants", list(tenants))
    for schema, rows in tenants.items():
        _at_0001(fleet, with_params(dsn, options=f"-c search_path={schema}"), rows)
    path = fleet.targets_file(
        f"[[discover]]\ndsn = \"{dsn}\"\nschemas = 'tenant\\_%'\n"
        '[[waves]]\nname = "all"\nparallel = 2\n'
    )
    code, out, err = fleet.cli(capsys, "plan", "--targets", str(path), "--json")
    assert code == 0, err
    doc = json.loads(out)
    by_schema = {t["name"].split("/")[-1]: t for t in doc["targets"]}
    assert set(by_schema) == set(tenants)
    for schema, rows in tenants.items():
        entry = by_schema[schema]
        assert entry["pending"] == ["0002"], entry
        assert entry["representative"].endswith("/tenant_b")  # one trace for the three
        # its own table, named as its sessions name it: no neighbour's
        assert list(entry["tables"]) == ["items"]
        assert entry["tables"]["items"]["rows"] == rows
    assert (by_schema["tenant_a"]["estimateMs"] < by_schema["tenant_c"]["estimateMs"]
            < by_schema["tenant_b"]["estimateMs"])  # fmt: skip
    for schema in tenants:
        applied = fleet.sql(dsn, f"SELECT revision FROM {schema}.queueguard_sqldir_ledger")
        assert applied == [("0001",)]
