"""`verify`, `rehearse` and `plan` of a Django project on databases that are not empty: a
fixture at an older migration upgraded through the originals a squash replaces must give the
catalog a fresh `migrate` (through the squash) gives, and a copy of the user's database is
rehearsed with Django's own migrate."""

from __future__ import annotations

import json
import re
import shutil
import threading
import time
from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest

from queueguard.cli import main
from queueguard.engine.apply.runner import upgrade
from queueguard.engine.apply.session import Limits
from queueguard.engine.formats.django import runner as django_upgrade
from queueguard.engine.plan import planner
from queueguard.errors import MigrationError
from queueguard.pg import tools
from queueguard.sets import django as django_format
from queueguard.sets import load
from tests.djangoset.conftest import add_migration, manage


def _dump(dsn: str, path: Path) -> None:
    done = tools.run("pg_dump", dsn, ["--no-owner", "--no-privileges"])
    assert done.returncode == 0, done.stderr
    path.write_bytes(done.stdout)


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, object]]:
    code = main([*argv, "--json"])
    return code, json.loads(capsys.readouterr().out)


def test_plan_reads_a_database_migrated_partway(shop: Path, empty_db: str) -> None:
    """The sample's sequences go on from the target's: Django's recorder inserts into
    django_migrations (an identity column) on the sample, where copied rows hold the first
    ids (it failed with a duplicate key before)."""
    manage(shop, empty_db, "migrate", "catalog", "0002")
    doc = planner.plan(load(shop, "django"), empty_db).document()
    assert doc["latestApplied"] == {"catalog": "0002_product_sku_stock"}
    ids = [r["id"] for r in doc["revisions"]]
    assert ids[0] == "catalog.0003_backfill_sku" and "catalog.0002_product_sku_stock" not in ids


def test_verify_upgrades_a_fixture_through_the_squashed_originals(
    shop: Path,
    make_db: Callable[..., str],
    pg_admin_dsn: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # a database frozen at orders.0002, made before the squash was written: `migrate` goes
    # on from there through the originals, not the squash
    before_squash = tmp_path / "before_squash"
    shutil.copytree(shop, before_squash)
    (before_squash / "orders" / "migrations" / "0001_squashed_0003_order_status.py").unlink()
    frozen = make_db()
    manage(before_squash, frozen, "migrate", "orders", "0002")
    fixtures = tmp_path / "fixtures"
    fixtures.mkdir()
    _dump(frozen, fixtures / "orders.0002_order_note--small.sql")
    argv = ["verify", "--migrations", str(shop), "--dsn", pg_admin_dsn, "--fixtures", str(fixtures)]
    code, doc = _run(capsys, *argv)
    checks = {c["name"]: c for c in doc["checks"]}  # type: ignore[union-attr]
    assert code == 0, doc
    assert set(checks) >= {"chain", "rerun", "bookkeeping", "fixture"}
    assert "every leaf" in checks["chain"]["detail"]
    assert "upgraded to head" in checks["fixture"]["detail"]

    # a squash that no longer equals what it replaces: the chain (through the squash) and
    # the fixture (through the originals) end in different catalogs
    squash = shop / "orders" / "migrations" / "0001_squashed_0003_order_status.py"
    text = squash.read_text()
    squash.write_text(text.replace("max_length=20)", "max_length=30)"))
    code, doc = _run(capsys, *argv)
    failed = [c for c in doc["checks"] if not c["ok"]]  # type: ignore[union-attr]
    assert code == 1
    assert [c["name"] for c in failed] == ["fixture"]
    assert any("status" in p for p in failed[0]["problems"]), failed

    # a fixture whose name says a migration its django_migrations does not hold
    (fixtures / "orders.0002_order_note--small.sql").rename(
        fixtures / "orders.0003_order_status--small.sql"
    )
    code, doc = _run(capsys, *argv)
    fixture = next(c for c in doc["checks"] if c["name"] == "fixture")  # type: ignore[union-attr]
    assert code == 1 and "does not hold orders.0003_order_status" in fixture["detail"]


def test_rehearse_runs_djangos_migrate_on_a_copy(
    shop: Path, empty_db: str, pg_admin_dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    manage(shop, empty_db, "migrate", "catalog", "0002")
    with psycopg.connect(empty_db) as conn:
        conn.execute("INSERT INTO catalog_category (name) VALUES ('tools')")
        conn.execute(
            "INSERT INTO catalog_product (name, price, category_id, sku, stock) "
            "SELECT 'p' || g, 1, (SELECT id FROM catalog_category), '', 1 "
            "FROM generate_series(1, 50) g"
        )
    code, doc = _run(
        capsys, "rehearse", "--migrations", str(shop), "--dsn", empty_db,
        "--scratch-dsn", pg_admin_dsn,
    )  # fmt: skip
    assert code == 0, doc
    assert doc["before"] is None and doc["latestApplied"]["catalog"] == "0005_product_weight"
    # the set's runner let go of the source while it was cloned
    assert doc["method"] == "template"
    statements = doc["statements"]
    backfill = [s for s in statements if s["revision"] == "catalog.0003_backfill_sku"]
    assert sum(bool(re.match(r'UPDATE "catalog_product"', s["sql"])) for s in backfill) == 50
    assert all(s["estimate_ms"] is not None for s in statements if s["sql"].startswith("ALTER"))
    # the source is never written
    assert manage(shop, empty_db, "showmigrations", "catalog").count("[X]") == 2


def test_upgrade_max_lock_refuses_a_migration_over_the_budget(
    shop: Path, empty_db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    manage(shop, empty_db, "migrate", "catalog", "0004")
    argv = ["upgrade", "--migrations", str(shop), "--dsn", empty_db, "--to"]
    # 0005 adds a column under ACCESS EXCLUSIVE: any hold is over a budget of nothing
    assert main([*argv, "catalog.0005_product_weight", "--max-lock", "0ms"]) == 1
    err = capsys.readouterr().err
    assert "catalog.0005_product_weight" in err and "nothing was changed" in err
    assert manage(shop, empty_db, "showmigrations", "catalog").count("[X]") == 4
    assert main([*argv, "catalog.0005_product_weight", "--max-lock", "1h"]) == 0
    assert manage(shop, empty_db, "showmigrations", "catalog").count("[X]") == 5


def test_a_project_with_djangos_connection_pool(shop: Path, empty_db: str) -> None:
    """Django's psycopg pool keeps the settings it was made with: the runner closes it when
    it points the alias elsewhere (a scratch copy, the target for writing), else the next
    connection came from the old pool and the nonce was not found on the new database."""
    settings = shop / "shop" / "settings.py"
    text = settings.read_text()
    pooled = text.replace(
        '"OPTIONS": {"connect_timeout": 5}', '"OPTIONS": {"connect_timeout": 5, "pool": True}'
    )
    assert pooled != text
    settings.write_text(pooled)
    mset = load(shop, "django")
    bill = planner.plan(mset, empty_db, to="catalog.0002_product_sku_stock")
    assert [rid for rid, _ in bill.revisions] == [
        "catalog.0001_initial",
        "catalog.0002_product_sku_stock",
    ]
    report = upgrade(mset, empty_db)
    assert (
        report.latest_applied is not None
        and report.latest_applied["catalog"] == "0005_product_weight"
    )


SLEEPY = """
from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("catalog", "0005_product_weight")]
    operations = [migrations.RunSQL("SELECT pg_sleep(60)", migrations.RunSQL.noop)]
"""


def test_a_cancelled_upgrade_stops_djangos_migrate_and_records_nothing(
    shop: Path, empty_db: str
) -> None:
    """A fleet's lost lease cancels the statement in flight: Django's runner is stopped, its
    migration's transaction rolled back by the server, nothing recorded."""
    add_migration(shop, "catalog", "0006_sleepy", SLEEPY)
    mset = load(shop, "django")
    upgrade(mset, empty_db, to="catalog.0005_product_weight")
    cancelled = threading.Event()
    threading.Timer(1.5, cancelled.set).start()
    started = time.monotonic()
    with pytest.raises(MigrationError):
        django_upgrade.upgrade(mset, empty_db, "catalog.0006_sleepy", Limits(), None, cancelled)
    assert time.monotonic() - started < 30  # not the statement's 60 s
    assert "catalog.0006_sleepy" not in _applied(empty_db)
    # a Django database past --to is not there (going there would unapply): said, not raised
    at = django_format.current(mset, empty_db)
    assert mset.at_head(at, "catalog.0005_product_weight")
    assert not mset.at_head(at, "catalog.0004_product_sku_index")
    assert not mset.at_head(at)


def _applied(dsn: str) -> list[str]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute("SELECT app || '.' || name FROM django_migrations").fetchall()
    return [r[0] for r in rows]
