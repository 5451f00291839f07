"""`upgrade --online` of a Django project: a migration whose statements over the budget were
captured exactly runs as the SQL Django's migrate sent, in the online forms (Django's index
and constraint names kept), recorded through Django's fake path; the end state is what
`manage.py migrate` gives (schema dump, `django_migrations`, post_migrate's rows), and a
migration with a Python step refuses, nothing changed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest

from queueguard.cli import main
from queueguard.engine.apply import progress
from queueguard.engine.online import proof
from queueguard.sets import load
from tests.djangoset.conftest import add_migration, manage

ONLINE = """
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("catalog", "0005_product_weight")]
    operations = [
        migrations.AddIndex("product", models.Index(fields=["stock"], name="product_stock_idx")),
        migrations.AddConstraint(
            "product",
            models.CheckConstraint(condition=models.Q(stock__gte=0), name="stock_not_negative"),
        ),
        migrations.AlterField("product", "price", models.BigIntegerField()),
        migrations.AlterField("product", "weight", models.IntegerField(null=True, db_index=True)),
    ]
"""

# after it, in another app: a plain migration through Django's migrate, and a new model
# whose content type post_migrate creates once, at the end
AFTER = """
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("orders", "0003_order_status"), ("catalog", "0006_online")]
    operations = [
        migrations.AddField("order", "total", models.IntegerField(null=True)),
        migrations.CreateModel("Refund", [("id", models.BigAutoField(primary_key=True))]),
    ]
"""

BACKFILL = """
from django.db import migrations


def fill(apps, schema_editor):
    apps.get_model("catalog", "Product").objects.filter(stock=0).update(stock=1)


class Migration(migrations.Migration):
    dependencies = [("catalog", "0005_product_weight")]
    operations = [
        migrations.RunPython(fill, migrations.RunPython.noop),
        migrations.RunSQL('CREATE INDEX product_stock_idx ON catalog_product (stock)'),
    ]
"""


PRIMARY_KEY = """
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("catalog", "0006_backfill")]
    operations = [migrations.AlterField("category", "id", models.AutoField(primary_key=True))]
"""


RENAME = """
from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("catalog", "0007_category_id")]
    operations = [migrations.RenameModel("Category", "Shelf")]
"""


def _fill(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("INSERT INTO catalog_category (name) VALUES ('tools')")
        conn.execute(
            "INSERT INTO catalog_product (name, category_id, price, sku, stock) "
            "SELECT 'p' || g, (SELECT min(id) FROM catalog_category), g, 's' || g, g % 7 "
            "FROM generate_series(1, 5000) g"
        )


def _rows(dsn: str, sql: str) -> list[tuple[object, ...]]:
    with psycopg.connect(dsn) as conn:
        return conn.execute(sql).fetchall()


def _migrations(dsn: str) -> list[str]:
    return sorted(f"{a}.{n}" for a, n in _rows(dsn, "SELECT app, name FROM django_migrations"))


def _twins(shop: Path, make_db: Callable[..., str]) -> tuple[str, str]:
    """Two databases at catalog 0005 with the same rows: one for queueguard, one for
    `manage.py migrate`."""
    mine, theirs = make_db(), make_db()
    for dsn in (mine, theirs):
        manage(shop, dsn, "migrate")
        _fill(dsn)
    return mine, theirs


def test_a_migration_runs_online_and_ends_where_migrate_ends(
    shop: Path, make_db: Callable[..., str], capsys: pytest.CaptureFixture[str]
) -> None:
    mine, theirs = _twins(shop, make_db)
    add_migration(shop, "catalog", "0006_online", ONLINE)
    add_migration(shop, "orders", "0004_order_total", AFTER)
    argv = ["--migrations", str(shop), "--dsn", mine, "--max-lock", "0ms"]

    assert main(["plan", *argv, "--online", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["online"]
    bill = {(r["revision"], tuple(f["kind"] for f in r["forms"])) for r in rows}
    assert ("catalog.0006_online", ("concurrent-index",)) in bill
    assert ("catalog.0006_online", ("rebuild",)) in bill

    assert main(["upgrade", *argv, "--online", "--sample-rows", "2000", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["proved"] is True
    forms = {f for d in report["online"] for f in d["forms"] or ()}
    assert {"concurrent-index", "not-valid", "rebuild"} <= forms
    assert report["latestApplied"]["orders"] == "0004_order_total"

    manage(shop, theirs, "migrate")
    assert proof.dump_differences(proof.schema_dump(theirs), proof.schema_dump(mine)) == []
    assert _migrations(mine) == _migrations(theirs)
    # Django's own names, and post_migrate's rows as one plain migrate leaves them
    assert _rows(mine, "SELECT to_regclass('product_stock_idx')::text") == [("product_stock_idx",)]
    content_types = "SELECT app_label, model FROM django_content_type ORDER BY 1, 2"
    assert _rows(mine, content_types) == _rows(theirs, content_types)
    assert ("orders", "refund") in _rows(mine, content_types)
    assert manage(shop, mine, "showmigrations") == manage(shop, theirs, "showmigrations")
    assert _rows(mine, "SELECT to_regclass('queueguard_progress')") == [(None,)]


INDEX = """
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("catalog", "0005_product_weight")]
    operations = [
        migrations.AddIndex("product", models.Index(fields=["stock"], name="product_stock_idx")),
    ]
"""
CHECK = """
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("catalog", "0006_stock_index")]
    operations = [
        migrations.AddConstraint(
            "product",
            models.CheckConstraint(condition=models.Q(stock__gte=0), name="stock_not_negative"),
        ),
    ]
"""
SQUASH = """
from django.db import migrations, models


class Migration(migrations.Migration):
    replaces = [("catalog", "0006_stock_index"), ("catalog", "0007_stock_check")]
    dependencies = [("catalog", "0005_product_weight")]
    operations = [
        migrations.AddIndex("product", models.Index(fields=["stock"], name="product_stock_idx")),
        migrations.AddConstraint(
            "product",
            models.CheckConstraint(condition=models.Q(stock__gte=0), name="stock_not_negative"),
        ),
    ]
"""


def test_a_squash_run_online_is_recorded_as_django_records_it(
    shop: Path, make_db: Callable[..., str], capsys: pytest.CaptureFixture[str]
) -> None:
    mine, theirs = _twins(shop, make_db)
    add_migration(shop, "catalog", "0006_stock_index", INDEX)
    add_migration(shop, "catalog", "0007_stock_check", CHECK)
    add_migration(shop, "catalog", "0006_squashed_0007_stock_check", SQUASH)
    argv = ["upgrade", "--migrations", str(shop), "--dsn", mine, "--max-lock", "0ms"]
    assert main([*argv, "--online", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["applied"] == ["catalog.0006_squashed_0007_stock_check"]
    assert report["proved"] is True
    manage(shop, theirs, "migrate")
    # each name the squash replaces, then the squash: as Django's recorder writes them
    assert _migrations(mine) == _migrations(theirs)
    assert {"catalog.0006_stock_index", "catalog.0007_stock_check"} <= set(_migrations(mine))
    assert "catalog.0006_squashed_0007_stock_check" in _migrations(mine)
    assert proof.dump_differences(proof.schema_dump(theirs), proof.schema_dump(mine)) == []


def test_a_python_step_and_a_primary_keys_type_refuse_and_change_nothing(
    shop: Path, make_db: Callable[..., str], capsys: pytest.CaptureFixture[str]
) -> None:
    mine = make_db()
    manage(shop, mine, "migrate")
    _fill(mine)
    add_migration(shop, "catalog", "0006_backfill", BACKFILL)
    add_migration(shop, "catalog", "0007_category_id", PRIMARY_KEY)
    add_migration(shop, "catalog", "0008_rename", RENAME)
    before = _migrations(mine)
    argv = ["upgrade", "--migrations", str(shop), "--dsn", mine, "--max-lock", "0ms"]
    assert main([*argv, "--online"]) == 1
    err = capsys.readouterr().err
    assert "catalog.0006_backfill" in err and "RunPython, a Python step" in err
    # Django carries the key's type to catalog_product.category_id: two tables, one rebuild
    assert "catalog.0007_category_id" in err
    assert "rewrites 2 tables (catalog_category, catalog_product)" in err
    # contenttypes' pre_migrate adds a RenameContentType (a RunPython) after a RenameModel
    assert "catalog.0008_rename" in err and "RenameContentType, a Python step" in err
    assert _migrations(mine) == before
    assert _rows(mine, "SELECT to_regclass('product_stock_idx')") == [(None,)]
    # a migration a killed online run left part applied: Django's migrate is not let at it
    with psycopg.connect(mine) as conn:
        progress.write(conn, load(shop, "django").get("catalog.0006_backfill"), 1)
        conn.commit()
    assert main(argv[:5]) == 1
    assert "left part applied by an `upgrade --online` run" in capsys.readouterr().err
    assert _migrations(mine) == before


INDEX_THEN_CHECK = """
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("catalog", "0005_product_weight")]
    operations = [
        migrations.AddIndex("product", models.Index(fields=["stock"], name="product_stock_idx")),
        migrations.AddConstraint(
            "product",
            models.CheckConstraint(condition=models.Q(stock__gte=0), name="stock_not_negative"),
        ),
    ]
"""


def _cli(shop: Path, dsn: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [
            sys.executable, "-c", "from queueguard.cli import main; raise SystemExit(main())",
            "upgrade", "--migrations", str(shop), "--dsn", dsn, "--online", "--max-lock", "0ms",
            "--lock-timeout", "60s",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )  # fmt: skip


@pytest.mark.slow
def test_a_killed_online_run_resumes_with_the_sql_it_began_with(
    shop: Path, make_db: Callable[..., str]
) -> None:
    """SIGKILL mid concurrent build: the rerun finishes the build the way it was begun (the
    migration's SQL kept with its progress row), then the rest, recorded once by Django."""
    mine, theirs = _twins(shop, make_db)
    add_migration(shop, "catalog", "0006_index_then_check", INDEX_THEN_CHECK)
    with psycopg.connect(mine, autocommit=True) as conn, psycopg.connect(mine) as old:
        old.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        old.execute("SELECT count(*) FROM catalog_product").fetchone()  # the build waits for it
        runner = _cli(shop, mine)
        deadline, building = time.monotonic() + 120, None
        while building is None and time.monotonic() < deadline and runner.poll() is None:
            building = conn.execute(
                "SELECT p.pid FROM pg_stat_progress_create_index p "
                "JOIN pg_stat_activity a USING (pid) "
                "WHERE a.application_name LIKE 'queueguard-upgrade online %' "
                "AND p.datname = current_database()"
            ).fetchone()
            time.sleep(0.01)
        assert building is not None, runner.communicate()
        os.kill(runner.pid, signal.SIGKILL)
        runner.wait()
        kept = conn.execute("SELECT statements FROM queueguard_progress").fetchone()
        assert kept is not None and "product_stock_idx" in kept[0]
        rerun = _cli(shop, mine)
        while conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE pid = %s", (building[0],)
        ).fetchone() == (1,):
            assert rerun.poll() is None, rerun.communicate()
            time.sleep(0.02)
        old.rollback()
    _, err = rerun.communicate(timeout=180)
    assert rerun.returncode == 0, err.decode()
    manage(shop, theirs, "migrate")
    assert proof.dump_differences(proof.schema_dump(theirs), proof.schema_dump(mine)) == []
    assert _migrations(mine) == _migrations(theirs)
    assert _rows(mine, "SELECT to_regclass('queueguard_progress')") == [(None,)]
