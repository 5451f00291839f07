"""`--format django`: a project read by Django's own loader in its interpreter, planned by
capturing Django's real migrate on a scratch copy, upgraded by Django's migrate with
queueguard's gates, its `django_migrations` written by Django alone."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest

from queueguard.cli import main
from queueguard.engine.apply.runner import upgrade
from queueguard.engine.apply.session import Limits
from queueguard.engine.plan import planner
from queueguard.errors import LockTimeout, UsageError
from queueguard.report.plan import markdown
from queueguard.sets import django as django_format
from queueguard.sets import load
from queueguard.sets.django_start import Options, manage_py_settings
from tests.djangoset.conftest import add_migration, manage


def _rows(dsn: str, sql: str) -> list[tuple[object, ...]]:
    with psycopg.connect(dsn) as conn:
        return conn.execute(sql).fetchall()


def _recorded(dsn: str) -> list[str]:
    rows = _rows(dsn, "SELECT app, name FROM django_migrations ORDER BY id")
    return [f"{a}.{n}" for a, n in rows]


def _shown(root: Path, dsn: str) -> set[str]:
    """What `manage.py showmigrations --list` says is applied."""
    applied, app = set(), None
    for line in manage(root, dsn, "showmigrations", "--list").splitlines():
        if not line.startswith(" "):
            app = line.strip()
        elif line.strip().startswith("[X]"):
            applied.add(f"{app}.{line.strip()[4:].split(' ')[0]}")
    return applied


def test_the_project_is_read_as_django_reads_it(shop: Path) -> None:
    assert manage_py_settings(shop) == "shop.settings"
    mset = load(shop)  # detected by its manage.py
    assert mset.format == "django"
    ids = mset.ids
    # the squash's originals come just before it; Django's order otherwise
    assert ids.index("catalog.0001_initial") < ids.index("orders.0001_squashed_0003_order_status")
    assert set(mset.heads) == {
        "catalog.0005_product_weight",
        "contenttypes.0002_remove_content_type_name",
        "orders.0001_squashed_0003_order_status",
    }
    backfill = mset.get("catalog.0003_backfill_sku")
    assert backfill.native[django_format.PYTHON] is True
    assert mset.get("catalog.0004_product_sku_index").native[django_format.ATOMIC] is False
    # with some originals applied, the squash gives way to them (Django's own plan)
    partial = "catalog.0001_initial,orders.0001_initial"
    assert [r.id for r in mset.pending(partial)][-2:] == [
        "orders.0002_order_note",
        "orders.0003_order_status",
    ]


def test_plan_captures_every_statement_of_djangos_migrate(shop: Path, empty_db: str) -> None:
    mset = load(shop, "django")
    doc = planner.plan(mset, empty_db).document()
    assert doc["current"] is None and doc["latestApplied"] == {}
    by_id = {r["id"]: r["statements"] for r in doc["revisions"]}
    assert next(iter(by_id)) == "catalog.0001_initial"
    first = by_id["catalog.0001_initial"]
    assert any('CREATE TABLE "catalog_category"' in s["sql"] for s in first)
    # the foreign key Django defers runs at the end of the migration, in its transaction
    fk = next(s for s in first if "FOREIGN KEY" in s["sql"])
    assert fk["origin"] == "deferred SQL" and fk["transactional"] is True
    assert {"relation": "catalog_category", "mode": "ShareRowExclusiveLock"} in fk["locks"]
    # RunPython's ORM statements, with the operation they came from
    backfill = by_id["catalog.0003_backfill_sku"]
    assert backfill and all(s["origin"] == "1: RunPython" for s in backfill)
    # the atomic = False migration's concurrent build ran outside a transaction
    (build,) = by_id["catalog.0004_product_sku_index"]
    assert build["transactional"] is False and "CONCURRENTLY" in build["sql"]
    # what the bill says of each migration as a whole, in the JSON and the Markdown
    notes = {r["id"]: r["notes"] for r in doc["revisions"]}
    assert notes["catalog.0001_initial"] == []
    assert [n.split(":")[0] for n in notes["catalog.0003_backfill_sku"]] == [
        "RunPython (operation 1)"
    ]
    built = notes["catalog.0004_product_sku_index"]
    assert built[0].startswith("atomic = False: each statement commits on its own")
    assert "not retry-safe as written" in built[1] and "a retry fails on it" in built[1]
    assert "not retry-safe as written" in markdown(doc)
    # the plan only read the target: no django_migrations there
    assert _rows(empty_db, "SELECT to_regclass('django_migrations')") == [(None,)]


def test_upgrade_records_as_django_records(shop: Path, empty_db: str) -> None:
    mset = load(shop, "django")
    first = upgrade(mset, empty_db, to="catalog.0003_backfill_sku")
    assert first.applied == [
        "catalog.0001_initial",
        "catalog.0002_product_sku_stock",
        "catalog.0003_backfill_sku",
    ]
    assert first.as_json()["latestApplied"] == {"catalog": "0003_backfill_sku"}
    assert set(_recorded(empty_db)) == _shown(shop, empty_db)
    rest = upgrade(mset, empty_db)
    assert rest.applied[-1] == "orders.0001_squashed_0003_order_status"
    recorded = _recorded(empty_db)
    # a squash: each replaced name, then the squash itself (check_replacements)
    assert recorded[-4:] == [
        "orders.0001_initial",
        "orders.0002_order_note",
        "orders.0003_order_status",
        "orders.0001_squashed_0003_order_status",
    ]
    # showmigrations lists the squash, not the originals it replaces
    assert set(recorded) - _shown(shop, empty_db) == {
        "orders.0001_initial",
        "orders.0002_order_note",
        "orders.0003_order_status",
    }
    # post_migrate ran as it always does: the content types are there
    types = _rows(empty_db, "SELECT app_label, model FROM django_content_type")
    assert ("catalog", "product") in types
    again = upgrade(mset, empty_db)
    assert again.applied == []
    # and the catalog is what the project's own migrate makes
    manage(shop, empty_db, "migrate", "--check")


def test_to_that_would_unapply_is_refused(shop: Path, empty_db: str) -> None:
    mset = load(shop, "django")
    upgrade(mset, empty_db, to="catalog.0003_backfill_sku")
    with pytest.raises(UsageError, match=re.escape("would unapply catalog.0003_backfill_sku")):
        upgrade(mset, empty_db, to="catalog.0002_product_sku_stock")


def test_status_says_each_apps_latest(
    shop: Path, empty_db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    upgrade(load(shop, "django"), empty_db, to="catalog.0002_product_sku_stock")
    code = main(["status", "--migrations", str(shop), "--dsn", empty_db, "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0
    assert doc["revision"] is None and doc["latestApplied"] == {"catalog": "0002_product_sku_stock"}
    assert doc["pending"][0] == "catalog.0003_backfill_sku"


def _hold(dsn: str, table: str) -> psycopg.Connection[tuple[object, ...]]:
    conn = psycopg.connect(dsn)
    conn.execute(f"LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE")
    return conn


def test_runpython_and_runsql_run_under_lock_timeout(shop: Path, empty_db: str) -> None:
    add_migration(
        shop,
        "catalog",
        "0006_touch",
        "from django.db import migrations\n\n\nclass Migration(migrations.Migration):\n"
        '    dependencies = [("catalog", "0005_product_weight")]\n'
        '    operations = [migrations.RunSQL("UPDATE catalog_product SET stock = stock")]\n',
    )
    mset = load(shop, "django")
    upgrade(mset, empty_db, to="catalog.0002_product_sku_stock")
    holder = _hold(empty_db, "catalog_product")
    try:
        limits = Limits(lock_timeout_ms=100, retries=1)
        with pytest.raises(LockTimeout, match=re.escape("catalog.0003_backfill_sku")):  # RunPython
            upgrade(mset, empty_db, to="catalog.0003_backfill_sku", limits=limits)
        assert "catalog.0003_backfill_sku" not in _recorded(empty_db)
    finally:
        holder.close()
    upgrade(mset, empty_db, to="catalog.0005_product_weight")
    holder = _hold(empty_db, "catalog_product")
    try:
        with pytest.raises(LockTimeout, match=re.escape("catalog.0006_touch")):  # RunSQL
            upgrade(mset, empty_db, limits=Limits(lock_timeout_ms=100, retries=0))
    finally:
        holder.close()


def test_a_retried_concurrent_build_drops_the_invalid_index(shop: Path, empty_db: str) -> None:
    mset = load(shop, "django")
    upgrade(mset, empty_db, to="catalog.0003_backfill_sku")
    with psycopg.connect(empty_db, autocommit=True) as conn:
        conn.execute("INSERT INTO catalog_category (name) VALUES ('c')")
        conn.execute(
            "INSERT INTO catalog_product (name, category_id, price, sku, stock) "
            "SELECT 'p', id, 1, 'same', 0 FROM catalog_category, generate_series(1, 2)"
        )
        # a failed earlier build left an INVALID index of the migration's name
        with pytest.raises(psycopg.errors.UniqueViolation):
            conn.execute(
                "CREATE UNIQUE INDEX CONCURRENTLY product_sku_idx ON catalog_product (sku)"
            )
    report = upgrade(mset, empty_db, to="catalog.0004_product_sku_index")
    assert any("INVALID index" in n for n in report.notes)
    assert _rows(
        empty_db,
        "SELECT indisvalid, indisunique FROM pg_index "
        "WHERE indexrelid = 'product_sku_idx'::regclass",
    ) == [(True, False)]


OPAQUE = """from django.db import connection, migrations
import threading


def raw(apps, schema_editor):
    with schema_editor.connection.connection.cursor() as cursor:
        cursor.execute("CREATE TABLE raw_made (id int)")


def threaded(apps, schema_editor):
    def work():
        with connection.cursor() as cursor:
            cursor.execute("CREATE TABLE thread_made (id int)")
        connection.close()

    worker = threading.Thread(target=work)
    worker.start()
    worker.join()


class Migration(migrations.Migration):
    dependencies = [("catalog", "0005_product_weight")]
    operations = [migrations.RunPython(raw), migrations.RunPython(threaded)]
"""


def test_a_raw_cursor_and_another_thread_make_a_migration_opaque(
    shop: Path, make_db: Callable[..., str]
) -> None:
    from queueguard.engine.formats.django import trace as django_revision

    add_migration(shop, "catalog", "0006_opaque", OPAQUE)
    mset = load(shop, "django")
    db = make_db()
    upgrade(mset, db, to="catalog.0005_product_weight")
    found = django_revision.capture(mset, db, mset.pending(django_format.current(mset, db)))
    reasons = found.migrations["catalog.0006_opaque"].opaque
    assert any("raw driver cursor" in r and "raw_made" in r for r in reasons)
    assert any("another thread" in r and "thread_made" in r for r in reasons)
    assert not found.migrations["contenttypes.0001_initial"].opaque
    notes = {t.revision.id: t.notes for t in found.traced}
    assert sum(n.startswith("opaque: ") for n in notes["catalog.0006_opaque"]) >= 2


LATE = """
from django.apps import AppConfig
from django.conf import settings


class CatalogConfig(AppConfig):
    name = "catalog"

    def ready(self):
        # a settings layer that computes DATABASES late, pointing somewhere else
        settings.DATABASES = {
            "default": {**settings.DATABASES["default"], "HOST": "late.invalid", "NAME": "late"},
            "reporting": settings.DATABASES["reporting"],
        }
"""


def test_the_dsn_reaches_the_target_when_databases_is_computed_late(
    shop: Path, empty_db: str
) -> None:
    (shop / "catalog" / "apps.py").write_text(LATE)
    mset = load(shop, "django")
    report = upgrade(mset, empty_db, to="catalog.0001_initial")
    assert report.applied == ["catalog.0001_initial"]
    assert _recorded(empty_db) == ["catalog.0001_initial"]


def test_another_alias_is_refused_loudly(shop: Path, empty_db: str) -> None:
    add_migration(
        shop,
        "catalog",
        "0006_reporting",
        "from django.db import connections, migrations\n\n\n"
        "def elsewhere(apps, schema_editor):\n"
        '    connections["reporting"].cursor().execute("SELECT 1")\n\n\n'
        "class Migration(migrations.Migration):\n"
        '    dependencies = [("catalog", "0005_product_weight")]\n'
        "    operations = [migrations.RunPython(elsewhere)]\n",
    )
    mset = load(shop, "django")
    with pytest.raises(Exception, match=re.escape("catalog.0006_reporting")):
        planner.plan(mset, empty_db)


def test_a_settings_module_that_is_missing_is_a_usage_error(shop: Path) -> None:
    with pytest.raises(Exception, match="no_such_settings"):
        django_format.load(shop, Options(settings="no_such_settings"))


def test_threads_left_running_do_not_leak() -> None:
    assert all(t.daemon or t is threading.main_thread() for t in threading.enumerate())


def test_lint_reads_the_captured_statements_and_flags_an_apps_two_leaves(shop: Path) -> None:
    from queueguard.lint.sets import lint_set

    mset = load(shop, "django")
    assert mset.conflicts == ()  # one leaf in each of three apps: Django's normal state
    report = lint_set(mset)
    flagged = {f.revision for f in report.flagged}
    assert "catalog.0004_product_sku_index" in flagged  # its captured concurrent build
    add_migration(
        shop,
        "catalog",
        "0005_other",
        "from django.db import migrations\n\n\nclass Migration(migrations.Migration):\n"
        '    dependencies = [("catalog", "0004_product_sku_index")]\n'
        "    operations = []\n",
    )
    two = load(shop, "django")
    assert set(two.conflicts) == {"catalog.0005_other", "catalog.0005_product_weight"}
    problem, fix = two.conflict_text()
    assert "`migrate` would refuse them" in problem and "makemigrations --merge" in fix


def test_lint_with_a_target_observes_the_pending_migrations(
    shop: Path, make_db: Callable[..., str], pg_admin_dsn: str
) -> None:
    """`lint --dsn` on a Django project: a pending migration's captured statement carries
    what its trace on a copy of the target saw; an applied one keeps the static guess."""
    from queueguard.lint.sets import lint_set

    target = make_db()
    manage(shop, target, "migrate", "catalog", "0003_backfill_sku")
    report = lint_set(load(shop, "django", target), dsn=target, scratch_admin=pg_admin_dsn)
    got = {s.revision: s for s in report.flagged}
    build = got["catalog.0004_product_sku_index"]
    assert build.observation is not None and build.cost.startswith("observed:")
    assert "SHARE UPDATE EXCLUSIVE on catalog_product" in build.cost  # a concurrent build
    applied = got["catalog.0002_product_sku_stock"]
    assert applied.observation is None and not applied.cost.startswith("observed:")


ORDER_TOTAL = """
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("orders", "0003_order_status"), ("catalog", "0005_product_weight")]
    operations = [migrations.AddField("order", "total", models.IntegerField(null=True))]
"""


def test_migrate_is_given_djangos_leaves(shop: Path, make_db: Callable[..., str]) -> None:
    """A migration depending on a squash's original and on another app's leaf: plain
    `migrate` applies it all in one run (a squash counted as an end once made `migrate app
    squash` unapply what came after it; a leaf another app depends on counted as no end)."""
    add_migration(shop, "orders", "0004_order_total", ORDER_TOTAL)
    mset = load(shop, "django")
    assert django_format.migrate_targets(mset, mset.pending(None)) == []
    ours, native = make_db(), make_db()
    report = upgrade(mset, ours)
    manage(shop, native, "migrate")
    assert report.applied[-2:] == [
        "orders.0001_squashed_0003_order_status",
        "orders.0004_order_total",
    ]
    assert sorted(_recorded(ours)) == sorted(_recorded(native))


def test_a_statements_before_is_the_previous_ones_after(
    shop: Path, make_db: Callable[..., str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Within a migration's transaction, the session read after one statement stands for the
    session before the next (nothing is sent between): what each statement did is the same
    as when it is read again."""
    from queueguard.engine.formats.django import trace as django_revision
    from queueguard.engine.plan import watch as python_revision

    mset = load(shop, "django")
    reused = django_revision.capture(mset, make_db(), mset.pending(None)).traced
    reads = 0
    fresh_run = python_revision.Watcher.run

    def fresh(
        self: object, conn: object, sql: str, execute: object, before: object = None
    ) -> object:
        nonlocal reads
        reads += 1
        return fresh_run(self, conn, sql, execute, None)  # type: ignore[arg-type]

    monkeypatch.setattr(python_revision.Watcher, "run", fresh)
    again = django_revision.capture(mset, make_db(), mset.pending(None)).traced

    def what(traced: list[object]) -> list[tuple[object, ...]]:
        return [
            (s.sql, s.transactional, s.locks, s.created, s.rewrites, s.scans, s.origin)
            for t in traced
            for s in t.seen  # type: ignore[attr-defined]
        ]

    assert reads > 10 and what(reused) == what(again)
