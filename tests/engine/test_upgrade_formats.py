"""`upgrade` on migration sets of other formats, on the embedded server: each format reaches
head from an empty database and from every intermediate revision with the catalog of the
files applied by hand and the native tool's bookkeeping; a revision failing in its last
statement leaves the previous revision whole; a revision split by a statement outside a
transaction resumes after an interruption; a version another tool left half applied is
refused; a held lock makes the upgrade give up with nothing changed.
"""

from __future__ import annotations

import json
import shutil
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest
from alembic import command

from queueguard import sets
from queueguard.cli import main
from queueguard.engine import catalog
from queueguard.engine.apply.progress import checksum
from queueguard.engine.apply.runner import upgrade
from queueguard.engine.apply.session import Limits
from queueguard.errors import (
    HalfApplied,
    LockTimeout,
    MigrationError,
    TamperedMigration,
    UsageError,
)
from queueguard.sets import alembic as alembic_format
from queueguard.sets import temporal
from queueguard.sets.alembic_config import config
from queueguard.sets.alembic_dsn import sqlalchemy_url

DATA = Path(__file__).parents[1] / "sets" / "data"
TEMPORAL_BOOKS = {"schema_version", "schema_update_history"}


def _tables(dsn: str) -> set[str]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = 'public'"
        ).fetchall()
    return {r[0] for r in rows}


def _catalog_without(dsn: str, bookkeeping: set[str]) -> Any:
    doc = catalog.document(catalog.introspect(dsn))
    return {
        k: {n: v for n, v in part.items() if n.split(".")[0] not in bookkeeping}
        if isinstance(part, dict)
        else part
        for k, part in doc.items()
    }


def _by_hand(dsn: str, mset: sets.MigrationSet, upto: str | None = None) -> None:
    """Each statement on its own, as a person with psql would (autocommit)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        for rev in mset.revisions:
            for statement in rev.statements or ():
                conn.execute(statement)  # type: ignore[arg-type]
            if rev.id == upto:
                return


def _history(dsn: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(dsn) as conn:
        return conn.execute(
            "SELECT version_partition, old_version, new_version, manifest_md5, description, "
            "year = extract(year FROM update_time), month = extract(month FROM update_time) "
            "FROM schema_update_history ORDER BY update_time"
        ).fetchall()


# temporal ----------------------------------------------------------------------------------
def test_temporal_reaches_head_with_the_native_bookkeeping(make_db: Callable[..., str]) -> None:
    mset = sets.load(DATA / "temporal")
    upgraded, by_hand = make_db(), make_db()
    report = upgrade(mset, upgraded)
    assert report.applied == ["0.1", "0.2", "1.0", "1.9", "1.10"] and report.after == "1.10"
    _by_hand(by_hand, mset)
    assert _catalog_without(upgraded, TEMPORAL_BOOKS) == _catalog_without(by_hand, set())
    # setup-schema -v 0.0, then one row per version (versions without files included)
    expected = [(0, "0", "0.0", "", "initial version", True, True)] + [
        (
            0,
            prev,
            rev.id,
            rev.native["manifest_md5"],
            rev.native["description"],
            True,
            True,
        )
        for prev, rev in zip(["0.0", *mset.ids], mset.revisions, strict=False)
    ]
    assert _history(upgraded) == expected
    with psycopg.connect(upgraded) as conn:
        row = conn.execute(
            "SELECT version_partition, db_name = current_database(), curr_version, "
            "min_compatible_version, creation_time IS NOT NULL FROM schema_version"
        ).fetchall()
    assert row == [(0, True, "1.10", mset.get("1.10").native["min_compatible_version"], True)]
    assert "queueguard_progress" not in _tables(upgraded)  # nothing of ours is left
    again = upgrade(mset, upgraded)
    assert again.applied == [] and _history(upgraded) == expected  # a rerun is a no-op


@pytest.mark.parametrize("start", ["0.1", "0.2", "1.0", "1.9"])
def test_temporal_from_every_intermediate_version(make_db: Callable[..., str], start: str) -> None:
    mset = sets.load(DATA / "temporal")
    dsn = make_db()
    upgrade(mset, dsn, to=start)
    report = upgrade(mset, dsn)
    assert report.before == start and report.after == "1.10"
    assert report.applied == list(mset.ids[mset.ids.index(start) + 1 :])
    assert [h[2] for h in _history(dsn)] == ["0.0", *mset.ids]


def _copy_set(tmp_path: Path, name: str) -> Path:
    folder = tmp_path / name
    shutil.copytree(DATA / name, folder)
    return folder


def test_a_temporal_version_failing_in_its_last_statement_changes_nothing(
    make_db: Callable[..., str], tmp_path: Path
) -> None:
    folder = _copy_set(tmp_path, "temporal")
    # 0.2's last file gets a statement that fails
    (folder / "v0.2" / "indexes.sql").write_text(
        (folder / "v0.2" / "indexes.sql").read_text() + "\nALTER TABLE nowhere ADD COLUMN x int;\n"
    )
    mset = sets.load(folder)
    dsn, reference = make_db(), make_db()
    upgrade(mset, reference, to="0.1")
    with pytest.raises(MigrationError, match=r"0\.2 failed at statement .* nothing was changed"):
        upgrade(mset, dsn)
    assert catalog.fingerprint(dsn) == catalog.fingerprint(reference)
    assert [h[2] for h in _history(dsn)] == ["0.0", "0.1"]


def test_a_half_applied_temporal_version_is_refused_naming_its_objects(
    make_db: Callable[..., str],
) -> None:
    mset = sets.load(DATA / "temporal")
    dsn = make_db()
    upgrade(mset, dsn, to="0.1")
    walks = mset.get("0.2").statements or ()
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(walks[0])  # type: ignore[arg-type]  # as the native tool would have
        conn.execute("CREATE INDEX walks_started_at_idx ON walks (dog_id)")  # another column
    before = catalog.fingerprint(dsn)
    with pytest.raises(HalfApplied) as caught:
        upgrade(mset, dsn)
    message = str(caught.value)
    assert "table walks exists (matches what it would create)" in message
    assert "index walks_started_at_idx exists (differs" in message
    assert catalog.fingerprint(dsn) == before
    assert main(["upgrade", "--migrations", str(DATA / "temporal"), "--dsn", dsn]) == 1


def test_a_temporal_database_restored_under_another_name_is_said_as_it_is(
    make_db: Callable[..., str], capsys: pytest.CaptureFixture[str]
) -> None:
    """Its version row is keyed by the old name: never read as empty (every object of the
    first version would look half applied); said, with the statement that adopts it."""
    folder = str(DATA / "temporal")
    dsn = make_db()
    upgrade(sets.load(folder), dsn, to="1.9")
    with psycopg.connect(dsn) as conn:
        conn.execute("UPDATE schema_version SET db_name = 'temporal_prod'")
        name = conn.execute("SELECT current_database()").fetchone()
    before = catalog.fingerprint(dsn)
    for verb in ("upgrade", "status", "plan"):
        capsys.readouterr()
        assert main([verb, "--migrations", folder, "--dsn", dsn]) == 1, verb
        err = capsys.readouterr().err
        assert (
            f"no version row for database {name[0] if name else ''}; schema_version has one "
            "for temporal_prod at 1.9 (restored under another name?); nothing was changed. "
            "To adopt it: UPDATE schema_version SET db_name = current_database() WHERE "
            "version_partition = 0 AND db_name = 'temporal_prod';"
        ) in err, err
        assert "half applied" not in err
    assert catalog.fingerprint(dsn) == before
    with psycopg.connect(dsn) as conn:
        assert temporal.take_over_version(conn, "temporal_prod") == 1
    assert main(["upgrade", "--migrations", folder, "--dsn", dsn]) == 0
    assert _history(dsn)[-1][2] == "1.10"


# sqldir ------------------------------------------------------------------------------------
SQLDIR = {
    "V1__accounts.sql": "CREATE TABLE accounts (id bigint PRIMARY KEY, email text);\n"
    "INSERT INTO accounts SELECT g, 'a' || g || '@x' FROM generate_series(1, 50) g;",
    "V2__flag.sql": "CREATE TABLE flag (on_ boolean);",
    # a revision split by a statement that cannot run in a transaction: the last statement
    # divides by the flag's row count (0 until the test inserts one)
    "V3__email_index.sql": "ALTER TABLE accounts ADD COLUMN verified boolean;\n"
    "CREATE UNIQUE INDEX CONCURRENTLY accounts_email ON accounts (email);\n"
    "UPDATE accounts SET verified = (1 / (SELECT count(*) FROM flag)) = 1;",
    "V3__email_index.down.sql": "DROP INDEX accounts_email;",
}


def _sqldir(tmp_path: Path) -> Path:
    folder = tmp_path / "sqldir"
    folder.mkdir()
    for name, text in SQLDIR.items():
        (folder / name).write_text(text)
    return folder


def test_sqldir_resumes_a_revision_split_by_a_concurrent_build(
    make_db: Callable[..., str], tmp_path: Path
) -> None:
    mset = sets.load(_sqldir(tmp_path))
    assert mset.ids == ("1", "2", "3")  # the .down.sql file is no revision
    dsn = make_db()
    # duplicate emails make the concurrent build fail and leave an invalid index behind
    upgrade(mset, dsn, to="2")
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("UPDATE accounts SET email = 'same' WHERE id <= 2")
    with pytest.raises(MigrationError, match=r"statement 2 .*statements 1–1 stay applied"):
        upgrade(mset, dsn)
    with psycopg.connect(dsn, autocommit=True) as conn:
        valid = conn.execute(
            "SELECT indisvalid FROM pg_index WHERE indexrelid = 'accounts_email'::regclass"
        ).fetchone()
        assert valid == (False,)  # the failed build's remains
        progress = conn.execute("SELECT revision, statement FROM queueguard_progress").fetchall()
        assert progress == [("3", 1)]
        ledger = conn.execute("SELECT revision FROM queueguard_sqldir_ledger").fetchall()
        assert sorted(ledger) == [("1",), ("2",)]  # the version did not move
        conn.execute("UPDATE accounts SET email = 'a1@x' WHERE id = 1")
    # the rebuilt index is valid; the last statement fails next (empty flag), after the index
    with pytest.raises(MigrationError, match="statement 3"):
        upgrade(mset, dsn)
    with psycopg.connect(dsn, autocommit=True) as conn:
        assert conn.execute(
            "SELECT indisvalid FROM pg_index WHERE indexrelid = 'accounts_email'::regclass"
        ).fetchone() == (True,)
        assert conn.execute("SELECT statement FROM queueguard_progress").fetchall() == [(2,)]
        conn.execute("INSERT INTO flag VALUES (true)")
    report = upgrade(mset, dsn)
    assert report.applied == ["3"] and report.resumed == ["3"] and report.after == "3"
    with psycopg.connect(dsn) as conn:
        assert conn.execute("SELECT count(*) FROM accounts WHERE verified").fetchone() == (50,)
        assert conn.execute("SELECT to_regclass('queueguard_progress')").fetchone() == (None,)


def test_sqldir_detects_a_file_changed_after_it_was_applied(
    make_db: Callable[..., str], tmp_path: Path
) -> None:
    folder = _sqldir(tmp_path)
    dsn = make_db()
    upgrade(sets.load(folder), dsn, to="2")
    (folder / "V1__accounts.sql").write_text(SQLDIR["V1__accounts.sql"] + "\n-- edited")
    with pytest.raises(TamperedMigration, match=r"V1__accounts\.sql: changed"):
        upgrade(sets.load(folder), dsn)


def test_a_held_lock_makes_the_upgrade_give_up_with_nothing_changed(
    make_db: Callable[..., str], tmp_path: Path
) -> None:
    mset = sets.load(_sqldir(tmp_path))
    dsn = make_db()
    upgrade(mset, dsn, to="2")
    before = catalog.fingerprint(dsn)
    with psycopg.connect(dsn) as holder:
        holder.execute("SELECT count(*) FROM accounts")  # a long reader: ACCESS SHARE
        started = time.monotonic()
        with pytest.raises(LockTimeout, match="nothing was changed"):
            upgrade(mset, dsn, limits=Limits(lock_timeout_ms=100, retries=2))
        took = time.monotonic() - started
        holder.rollback()
    assert took < 10  # the ladder: 0.1 + 0.15 + 0.225 s of waits and two short sleeps
    assert catalog.fingerprint(dsn) == before


# alembic -----------------------------------------------------------------------------------
def test_alembic_reaches_head_and_alembic_current_agrees(make_db: Callable[..., str]) -> None:
    root = DATA / "alembic_plain"
    mset = sets.load(root)
    dsn = make_db()
    report = upgrade(mset, dsn, to=mset.ids[0])
    assert report.after == mset.ids[0]
    report = upgrade(mset, dsn)
    assert report.applied == list(mset.ids[1:]) and report.after == mset.ids[-1]
    cfg = config(root, dsn)
    command.current(cfg)
    assert mset.ids[-1] in cfg.stdout.getvalue()  # type: ignore[attr-defined]
    assert _tables(dsn) == {"item", "alembic_version"}  # nothing of ours


def test_the_cli_upgrades_a_migration_set_and_reruns_as_a_no_op(
    make_db: Callable[..., str], capsys: pytest.CaptureFixture[str]
) -> None:
    dsn = make_db()
    folder = str(DATA / "temporal")
    assert main(["upgrade", "--migrations", folder, "--dsn", dsn, "--to", "v1.9"]) == 0
    assert "applied 0.1, 0.2, 1.0, 1.9" in capsys.readouterr().out
    assert main(["upgrade", "--migrations", folder, "--dsn", dsn, "--json"]) == 0
    assert '"after": "1.10"' in capsys.readouterr().out
    assert main(["upgrade", "--migrations", folder, "--dsn", dsn]) == 0
    assert "already at 1.10" in capsys.readouterr().out
    assert temporal.current(psycopg.connect(dsn)) == "1.10"


def test_two_runners_at_once_apply_each_version_once(make_db: Callable[..., str]) -> None:
    mset = sets.load(DATA / "temporal")
    dsn = make_db()
    results: list[Any] = []

    def run() -> None:
        try:
            results.append(upgrade(mset, dsn))
        except Exception as exc:
            results.append(exc)

    threads = [threading.Thread(target=run) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(not isinstance(r, Exception) for r in results), results
    assert sorted(mset.ids) == sorted(r for rep in results for r in rep.applied)
    assert [h[2] for h in _history(dsn)] == ["0.0", *mset.ids]


# every format: a failing last statement, every intermediate start, the files by hand -------
def test_a_sqldir_revision_failing_in_its_last_statement_changes_nothing(
    make_db: Callable[..., str], tmp_path: Path
) -> None:
    folder = _sqldir(tmp_path)
    (folder / "V2__flag.sql").write_text(SQLDIR["V2__flag.sql"] + "\nSELECT 1 / 0;")
    mset = sets.load(folder)
    dsn, reference = make_db(), make_db()
    upgrade(mset, reference, to="1")
    with pytest.raises(MigrationError, match=r"2 failed at statement 2 .*nothing was changed"):
        upgrade(mset, dsn)
    assert catalog.fingerprint(dsn) == catalog.fingerprint(reference)
    with psycopg.connect(dsn) as conn:
        ledger = conn.execute("SELECT revision FROM queueguard_sqldir_ledger").fetchall()
    assert ledger == [("1",)]


def test_an_alembic_revision_failing_in_its_last_statement_changes_nothing(
    make_db: Callable[..., str], tmp_path: Path
) -> None:
    root = _copy_set(tmp_path, "alembic_plain")
    second = next((root / "migrations" / "versions").glob("2b1d6f803c02_*.py"))
    # the revision's last statement, after its data migration, fails
    last = '            {"label": name.title(), "id": id_},\n        )\n'
    assert last in second.read_text()
    second.write_text(second.read_text().replace(last, last + '    op.execute("SELECT 1 / 0")\n'))
    mset = sets.load(root)
    dsn, reference = make_db(), make_db()
    upgrade(mset, reference, to=mset.ids[0])
    upgrade(mset, dsn, to=mset.ids[0])
    with psycopg.connect(dsn) as conn:
        conn.execute("INSERT INTO item (id, name) VALUES (100, 'a'), (101, 'b')")
    with psycopg.connect(reference) as conn:
        conn.execute("INSERT INTO item (id, name) VALUES (100, 'a'), (101, 'b')")
    with pytest.raises(MigrationError, match="division by zero"):
        upgrade(mset, dsn)
    assert catalog.fingerprint(dsn) == catalog.fingerprint(reference)
    assert alembic_format.current(dsn, "alembic_version") == mset.ids[0]


@pytest.mark.parametrize("start", ["1", "2"])
def test_sqldir_from_every_intermediate_revision_equals_the_files_by_hand(
    make_db: Callable[..., str], tmp_path: Path, start: str
) -> None:
    mset = sets.load(_sqldir(tmp_path))
    dsn, by_hand = make_db(), make_db()
    upgrade(mset, dsn, to=start)
    upgrade(mset, dsn, to="2")
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("INSERT INTO flag VALUES (true)")  # revision 3 divides by its row count
    report = upgrade(mset, dsn)
    assert (report.before, report.after, report.applied) == ("2", "3", ["3"])
    with psycopg.connect(by_hand, autocommit=True) as conn:
        for rev in mset.revisions:
            if rev.id == "3":
                conn.execute("INSERT INTO flag VALUES (true)")
            for statement in rev.statements or ():
                conn.execute(statement)  # type: ignore[arg-type]
    ours = _catalog_without(dsn, {"queueguard_sqldir_ledger"})
    assert ours == _catalog_without(by_hand, set())


def test_status_reads_a_migration_set_and_our_own_commands_refuse_one(
    make_db: Callable[..., str], capsys: pytest.CaptureFixture[str]
) -> None:
    dsn = make_db()
    folder = str(DATA / "temporal")
    upgrade(sets.load(DATA / "temporal"), dsn, to="0.2")
    assert main(["status", "--migrations", folder, "--dsn", dsn, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert (doc["format"], doc["revision"], doc["head"]) == ("temporal", "0.2", "1.10")
    assert doc["pending"] == ["1.0", "1.9", "1.10"]
    for ours in (["preflight", "--dsn", dsn], ["manifest"]):
        assert main([*ours, "--migrations", folder]) == 2
        assert "is a temporal migration set" in capsys.readouterr().err


def test_a_crash_after_a_concurrent_build_before_its_progress_row_resumes(
    make_db: Callable[..., str], tmp_path: Path
) -> None:
    """The build finished, the runner died before it recorded so: the rerun finds the index
    built and valid at the recorded statement, and goes on (no "already exists" error, no
    second build)."""
    mset = sets.load(_sqldir(tmp_path))
    dsn = make_db()
    upgrade(mset, dsn, to="2")
    third = mset.get("3")
    statements = third.statements or ()
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(statements[0])  # type: ignore[arg-type]  # committed with its progress row
        conn.execute(
            "CREATE TABLE queueguard_progress (revision text PRIMARY KEY, statement int NOT "
            "NULL, sha256 text NOT NULL, updated_at timestamptz NOT NULL DEFAULT now())"
        )
        conn.execute(
            "INSERT INTO queueguard_progress (revision, statement, sha256) VALUES (%s, 1, %s)",
            ("3", checksum(third)),
        )
        conn.execute(statements[1])  # type: ignore[arg-type]  # the build, then the crash
        conn.execute("INSERT INTO flag VALUES (true)")
    report = upgrade(mset, dsn)
    assert report.applied == ["3"] and report.resumed == ["3"] and report.after == "3"
    with psycopg.connect(dsn) as conn:
        assert conn.execute("SELECT count(*) FROM accounts WHERE verified").fetchone() == (50,)
        assert conn.execute("SELECT to_regclass('queueguard_progress')").fetchone() == (None,)


@pytest.mark.parametrize("start", [0, 1])
def test_alembic_from_every_intermediate_revision(make_db: Callable[..., str], start: int) -> None:
    mset = sets.load(DATA / "alembic_plain")
    dsn = make_db()
    upgrade(mset, dsn, to=mset.ids[start])
    report = upgrade(mset, dsn)
    assert report.applied == list(mset.ids[start + 1 :]) and report.after == mset.ids[-1]


def test_a_revision_that_drops_and_adds_again_or_tolerates_existing_objects_is_not_half_applied(
    make_db: Callable[..., str], tmp_path: Path
) -> None:
    """A column "fixed" by DROP then ADD in one version (as Temporal's 1.16 does), and objects
    created IF NOT EXISTS, exist before the version runs without it being half applied."""
    folder = tmp_path / "fixes"
    folder.mkdir()
    (folder / "V1__t.sql").write_text(
        "CREATE TABLE t (id int PRIMARY KEY, enc varchar(16) NULL);\nCREATE INDEX t_enc ON t (enc);"
    )
    (folder / "V2__fix.sql").write_text(
        "ALTER TABLE t DROP COLUMN enc;\n"
        "ALTER TABLE t ADD COLUMN enc varchar(16) NOT NULL DEFAULT '';\n"
        "CREATE INDEX IF NOT EXISTS t_id_enc ON t (id, enc);"
    )
    mset = sets.load(folder)
    dsn = make_db()
    upgrade(mset, dsn, to="1")
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE INDEX t_id_enc ON t (id)")  # IF NOT EXISTS: the revision's call
    assert upgrade(mset, dsn).applied == ["2"]


def test_an_env_py_connecting_elsewhere_is_refused_before_it_runs_anything(
    make_db: Callable[..., str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An env.py that connects by its own setting (DATABASE_URL) instead of the URL it was
    given: plan must not migrate that database (the target it promised only to read), nor
    upgrade another database than --dsn."""
    root = _copy_set(tmp_path, "alembic_plain")
    env = root / "migrations" / "env.py"
    env.write_text(
        env.read_text().replace(
            "    connectable = engine_from_config(\n"
            "        config.get_section(config.config_ini_section, {}),\n"
            '        prefix="sqlalchemy.",\n',
            "    import os\n\n"
            "    connectable = engine_from_config(\n"
            '        {"sqlalchemy.url": os.environ["QG_TEST_DATABASE_URL"]},\n'
            '        prefix="sqlalchemy.",\n',
        )
    )
    mset = sets.load(root)
    target, other = make_db(), make_db()
    monkeypatch.setenv("QG_TEST_DATABASE_URL", sqlalchemy_url(target).render_as_string(False))
    before = catalog.fingerprint(target)
    assert main(["plan", "--migrations", str(root), "--dsn", target]) == 2
    assert catalog.fingerprint(target) == before  # the target only read
    with pytest.raises(UsageError, match=r"env\.py connected to database"):
        upgrade(mset, other)
    assert catalog.fingerprint(target) == before and _tables(other) == set()


def test_a_runner_starting_during_another_ones_concurrent_build_waits_it_out(
    make_db: Callable[..., str], tmp_path: Path
) -> None:
    """The second runner polls for the runner lock instead of waiting in a statement: a
    waiting statement would hold a snapshot the first one's concurrent build waits for."""
    folder = tmp_path / "cic"
    folder.mkdir()
    (folder / "V1__big.sql").write_text(
        "CREATE TABLE big (id bigint PRIMARY KEY, v text);\n"
        "INSERT INTO big SELECT g, md5(g::text) FROM generate_series(1, 300000) g;"
    )
    (folder / "V2__index.sql").write_text(
        "CREATE INDEX CONCURRENTLY big_v ON big (v);\nALTER TABLE big ADD COLUMN w int;"
    )
    mset = sets.load(folder)
    dsn = make_db()
    upgrade(mset, dsn, to="1")
    results: list[Any] = []

    def run() -> None:
        try:
            results.append(upgrade(mset, dsn, limits=Limits(runner_wait_s=60)))
        except Exception as exc:
            results.append(exc)

    first = threading.Thread(target=run)
    first.start()
    with psycopg.connect(dsn, autocommit=True) as watch:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            building = watch.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'CREATE INDEX CONC%%' "
                "AND state = 'active' AND datname = current_database()"
            ).fetchone()
            if building and building[0]:
                break
            time.sleep(0.005)
    second = threading.Thread(target=run)
    second.start()
    first.join()
    second.join()
    assert all(not isinstance(r, Exception) for r in results), results
    assert sorted(r for rep in results for r in rep.applied) == ["2"]
    with psycopg.connect(dsn) as conn:
        ledger = conn.execute("SELECT revision FROM queueguard_sqldir_ledger").fetchall()
        valid = conn.execute(
            "SELECT indisvalid FROM pg_index WHERE indexrelid = 'big_v'::regclass"
        ).fetchone()
    assert sorted(ledger) == [("1",), ("2",)] and valid == (True,)
