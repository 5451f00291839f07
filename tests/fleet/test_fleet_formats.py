"""`fleet upgrade` with every format queueguard reads: queueguard's own set, an Alembic
project and Temporal's schema on database targets, Temporal's schema on schema targets;
each target ends as `queueguard upgrade` leaves the same database alone (its catalog and its
native bookkeeping)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import psycopg
import pytest

from queueguard.cli import main
from queueguard.engine import catalog
from tests.fleet.conftest import Fleet

pytestmark = pytest.mark.slow

DATA = Path(__file__).parents[1] / "sets" / "data"
SHOP = Path(__file__).parents[1] / "django_projects" / "shop"


def _fleet_then_alone(
    fleet: Fleet, capsys: pytest.CaptureFixture[str], migrations: str | None, start: str | None
) -> tuple[list[str], list[str]]:
    """Two targets (one empty, one at `start`) upgraded by fleet, and their twins alone."""
    fleeted, alone = [], []
    for name in ("empty", "started"):
        for twin in (fleeted, alone):
            dsn = fleet.database(f"{name}_{'f' if twin is fleeted else 'a'}")
            twin.append(dsn)
            if name == "started" and start is not None:
                args = ["upgrade", "--dsn", dsn, "--to", start]
                assert main(args + (["--migrations", migrations] if migrations else [])) == 0
    body = "".join(f'[[targets]]\nname = "t{i}"\ndsn = "{d}"\n' for i, d in enumerate(fleeted))
    path = fleet.root / "fleet.toml"
    path.write_text(body)
    args = ["--migrations", migrations] if migrations else []
    code, _, err = fleet.cli(capsys, "upgrade", "--targets", str(path), *args)
    assert code == 0, err
    for dsn in alone:
        assert main(["upgrade", "--dsn", dsn, *args]) == 0
    capsys.readouterr()
    return fleeted, alone


def _same(a: str, b: str, ledger: str) -> None:
    assert catalog.fingerprint(a) == catalog.fingerprint(b)
    with psycopg.connect(a) as ca, psycopg.connect(b) as cb:
        assert ca.execute(ledger).fetchall() == cb.execute(ledger).fetchall()


@pytest.mark.parametrize(
    ("migrations", "start", "ledger"),
    [
        (None, "002", "SELECT version_num FROM queueguard_version"),
        (str(DATA / "alembic_plain"), None, "SELECT version_num FROM alembic_version"),
        (str(DATA / "temporal"), "1.0",
         "SELECT curr_version, min_compatible_version FROM schema_version"),
    ],
    ids=["queueguard", "alembic", "temporal"],
)  # fmt: skip
def test_each_format_on_database_targets_ends_as_upgrade_alone(
    fleet: Fleet,
    capsys: pytest.CaptureFixture[str],
    migrations: str | None,
    start: str | None,
    ledger: str,
) -> None:
    fleeted, alone = _fleet_then_alone(fleet, capsys, migrations, start)
    for a, b in zip(fleeted, alone, strict=True):
        _same(a, b, ledger)


def test_temporal_on_schema_targets_keeps_each_schema_its_own_schema_version(
    fleet: Fleet, capsys: pytest.CaptureFixture[str]
) -> None:
    shared = fleet.schemas("shared", ["tenant_a", "tenant_b"])
    path = fleet.root / "fleet.toml"
    path.write_text(f"[[discover]]\ndsn = \"{shared}\"\nschemas = 'tenant\\_%'\n")
    code, _, err = fleet.cli(
        capsys, "upgrade", "--targets", str(path), "--migrations", str(DATA / "temporal")
    )
    assert code == 0, err
    for schema in ("tenant_a", "tenant_b"):
        rows = fleet.sql(shared, f"SELECT curr_version FROM {schema}.schema_version")
        assert rows == [("1.10",)]
    assert fleet.sql(shared, "SELECT to_regclass('public.schema_version')") == [(None,)]
    code, _, err = fleet.cli(
        capsys, "upgrade", "--targets", str(path), "--migrations", str(DATA / "temporal")
    )
    assert code == 0, err


def test_an_alembic_set_on_schema_targets_keeps_each_schema_its_tables_and_version_table(
    fleet: Fleet, capsys: pytest.CaptureFixture[str]
) -> None:
    shared = fleet.schemas("shared", ["tenant_a", "tenant_b"])
    path = fleet.root / "fleet.toml"
    path.write_text(f"[[discover]]\ndsn = \"{shared}\"\nschemas = 'tenant\\_%'\n")
    project = str(DATA / "alembic_plain")
    code, _, err = fleet.cli(capsys, "upgrade", "--targets", str(path), "--migrations", project)
    assert code == 0, err
    for schema in ("tenant_a", "tenant_b"):
        assert fleet.sql(shared, f"SELECT version_num FROM {schema}.alembic_version") == [
            ("3c2e70914d03",)
        ]
        assert fleet.sql(shared, f"SELECT to_regclass('{schema}.ix_item_label')") != [(None,)]
    assert fleet.sql(shared, "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'") == [(0,)]
    code, _, err = fleet.cli(capsys, "upgrade", "--targets", str(path), "--migrations", project)
    assert code == 0, err


def test_a_django_project_on_database_targets_ends_as_upgrade_alone(
    fleet: Fleet, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each target's migrate in a runner of its own (the targets run side by side), its
    django_migrations written by Django: as `queueguard upgrade` leaves the same database."""
    shop = fleet.root / "shop"
    shutil.copytree(SHOP, shop, ignore=shutil.ignore_patterns("__pycache__"))
    fleeted, alone = _fleet_then_alone(fleet, capsys, str(shop), "catalog.0002_product_sku_stock")
    ledger = "SELECT app, name FROM django_migrations ORDER BY app, name"
    for a, b in zip(fleeted, alone, strict=True):
        _same(a, b, ledger)
    with psycopg.connect(fleeted[1]) as conn:
        rows = conn.execute("SELECT count(*) FROM django_migrations").fetchone()
    assert rows is not None and rows[0] == 11  # every migration, the squash's originals too
    # the board says each target's state as `status` says one database's: app by app
    code, out, _ = fleet.cli(capsys, "status", "--targets", str(fleet.root / "fleet.toml"),
                             "--migrations", str(shop), "--output", "json")  # fmt: skip
    assert code == 0
    assert main(["status", "--migrations", str(shop), "--dsn", fleeted[0], "--json"]) == 0
    alone_doc = json.loads(capsys.readouterr().out)
    for target in json.loads(out)["targets"]:
        assert target["revision"] is None
        assert target["latestApplied"] == alone_doc["latestApplied"] != {}


ONLINE_INDEX = """
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("catalog", "0005_product_weight")]
    operations = [
        migrations.AddIndex("product", models.Index(fields=["stock"], name="product_stock_idx")),
        migrations.AlterField("product", "price", models.BigIntegerField()),
    ]
"""


def test_a_django_project_online_ends_as_upgrade_alone(
    fleet: Fleet, capsys: pytest.CaptureFixture[str]
) -> None:
    """`fleet upgrade --online`: the group's forms prepared once, each target's migration run
    as SQL in them and recorded through Django's fake path, in a runner of its own."""
    from tests.djangoset.conftest import add_migration, manage

    shop = fleet.root / "shop"
    shutil.copytree(SHOP, shop, ignore=shutil.ignore_patterns("__pycache__"))
    fleeted, alone = [], []
    for i in range(2):
        for twin in (fleeted, alone):
            dsn = fleet.database(f"dj{i}_{'f' if twin is fleeted else 'a'}")
            twin.append(dsn)
            manage(shop, dsn, "migrate")
            fleet.sql(dsn, "INSERT INTO catalog_category (name) VALUES ('tools')")
            fleet.sql(
                dsn,
                "INSERT INTO catalog_product (name, category_id, price, sku, stock) SELECT "
                "'p' || g, (SELECT min(id) FROM catalog_category), g, 's' || g, g % 7 "
                "FROM generate_series(1, 3000) g",
            )
    add_migration(shop, "catalog", "0006_online", ONLINE_INDEX)
    path = fleet.root / "fleet.toml"
    path.write_text(
        "".join(f'[[targets]]\nname = "t{i}"\ndsn = "{d}"\n' for i, d in enumerate(fleeted))
    )
    args = ["--migrations", str(shop), "--max-lock", "0ms"]
    code, _, err = fleet.cli(capsys, "upgrade", "--targets", str(path), *args, "--online")
    assert code == 0, err
    assert "proof: 2 statement(s) online" in err
    for dsn in alone:
        assert main(["upgrade", "--dsn", dsn, *args, "--force"]) == 0
    capsys.readouterr()
    ledger = "SELECT app, name FROM django_migrations ORDER BY app, name"
    for a, b in zip(fleeted, alone, strict=True):
        _same(a, b, ledger)
        assert ("catalog", "0006_online") in fleet.sql(a, ledger)
