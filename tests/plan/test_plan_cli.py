"""`queueguard plan` from the command line: the target is only read (every statement sent to
it is a read, as a role that can do nothing else), the JSON document's shape for each format,
`--max-lock` and bad input, and the sessions a statement would queue behind.

One v0.3 database (queueguard's own set, with rows) and one small table with rows (a plain
SQL directory) serve the whole module: `plan` never changes its target, which the first test
proves.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from queueguard.cli import main
from queueguard.engine.catalog import fingerprint
from queueguard.pg import scratch, tools
from queueguard.pg.connect import connection
from queueguard.pg.dsn import with_params
from queueguard.queue_schema.runner import upgrade
from queueguard.sets import load
from queueguard.sets import temporal as temporal_format
from tests.upgrade.preflight_support import V03_ROWS, execute

DATA = Path(__file__).resolve().parent.parent / "sets" / "data"
AEL, SUEL, ASL = "AccessExclusiveLock", "ShareUpdateExclusiveLock", "AccessShareLock"

#: the keys of the JSON document, as docs/interfaces.md lists them
DOCUMENT_KEYS = {
    "schemaVersion",
    "format",
    "current",
    "target",
    "currentHeads",
    "targetHeads",
    "walBytes",
    "extraDiskBytes",
    "maxLockMs",
    "sampleRows",
    "ok",
    "revisions",
}
STATEMENT_KEYS = {
    "index",
    "sql",
    "transactional",
    "locks",
    "rewrites",
    "scans",
    "created",
    "estimate_ms",
    "held_ms",
    "basis",
    "wal_bytes",
    "wal_basis",
    "extra_disk_bytes",
    "verdict",
    "safer",
    "waits_behind",
}
VERDICTS = {"ok", "blocks-writes", "blocks-reads", "exceeds-max-lock"}

#: what a read looks like: a query, a setting read, or a COPY of a query's rows out
_COMMENTS = re.compile(r"^(\s*(--[^\n]*\n|/\*.*?\*/))*\s*", re.DOTALL)
_READ = re.compile(r"^\(?\s*(SELECT|WITH|SHOW)\b", re.IGNORECASE)
_COPY_OUT = re.compile(r"^COPY\s*\(\s*(SELECT|WITH)\b.*\)\s*TO\s+STDOUT\b", re.I | re.S)

SQLDIR_TARGET = """
CREATE TABLE account (id int PRIMARY KEY, name text NOT NULL, balance int NOT NULL);
INSERT INTO account SELECT g, 'a' || g, g % 100 FROM generate_series(1, 3000) g;
ANALYZE account;
"""
REWRITE = "ALTER TABLE account ALTER COLUMN balance TYPE bigint"


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["plan", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def _plan_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    code, out, err = _run(capsys, *argv, "--json")
    assert code == 0, err
    doc: dict[str, Any] = json.loads(out)
    _check_shape(doc)
    return doc


def _check_shape(doc: dict[str, Any]) -> None:
    assert set(doc) == DOCUMENT_KEYS
    assert doc["schemaVersion"] == 1
    for revision in doc["revisions"]:
        assert set(revision) == {"id", "walBytes", "extraDiskBytes", "notes", "statements"}
        for i, s in enumerate(revision["statements"]):
            assert set(s) == STATEMENT_KEYS, s
            assert s["index"] == i
            assert isinstance(s["sql"], str) and isinstance(s["transactional"], bool)
            assert all(set(lock) == {"relation", "mode"} for lock in s["locks"])
            assert isinstance(s["estimate_ms"], float) and isinstance(s["held_ms"], float)
            assert s["held_ms"] >= s["estimate_ms"] or not s["transactional"]
            assert s["basis"] and s["verdict"] in VERDICTS


def _statements(doc: dict[str, Any], revision: str) -> list[dict[str, Any]]:
    (found,) = [r["statements"] for r in doc["revisions"] if r["id"] == revision]
    return found


def _strongest(statements: list[dict[str, Any]]) -> dict[str, str]:
    order = [ASL, "RowShareLock", "RowExclusiveLock", SUEL, "ShareLock", "ShareRowExclusiveLock"]
    order += ["ExclusiveLock", AEL]
    found: dict[str, str] = {}
    for s in statements:
        for lock in s["locks"]:
            rel, mode = lock["relation"], lock["mode"]
            if rel not in found or order.index(mode) > order.index(found[rel]):
                found[rel] = mode
    return found


def _row_counts(dsn: str) -> dict[str, int]:
    with connection(dsn) as conn:
        tables = [
            r[0]
            for r in conn.execute(
                "SELECT quote_ident(tablename) FROM pg_tables WHERE schemaname = 'public'"
            ).fetchall()
        ]
        return {
            t: int(conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0])  # type: ignore[index]
            for t in tables
        }


def _scratch_names(admin: str) -> set[str]:
    with connection(admin) as conn:
        rows = conn.execute("SELECT datname FROM pg_database WHERE datname LIKE 'qgplan%'")
        return {r[0] for r in rows.fetchall()}


# shared targets ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def databases(pg_admin_dsn: str) -> Iterator[scratch.ScratchDatabases]:
    with scratch.ScratchDatabases(pg_admin_dsn, prefix="qgplantest") as found:
        yield found


@pytest.fixture(scope="module")
def v03(databases: scratch.ScratchDatabases) -> str:
    """A v0.3 database with rows (never changed by `plan`)."""
    dsn = databases.create()
    upgrade(dsn, to="003", progress=False)
    execute(dsn, V03_ROWS)
    return dsn


@pytest.fixture(scope="module")
def rewrite_set(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("sqldir")
    (folder / "001_widen_balance.sql").write_text(REWRITE + ";\n")
    return folder


@pytest.fixture(scope="module")
def accounts(databases: scratch.ScratchDatabases) -> str:
    """3000 rows in one table, for a set that rewrites it."""
    dsn = databases.create()
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(SQLDIR_TARGET)  # type: ignore[arg-type]
    return dsn


# 1. the target is only read ------------------------------------------------------------------
@pytest.fixture
def reader_dsn(v03: str, pg_admin_dsn: str) -> Iterator[str]:
    """A role with CONNECT and SELECT only, whose every transaction is read only."""
    role = f"qg_planreader_{uuid.uuid4().hex[:8]}"
    db = scratch.dbname_of(v03)
    execute(
        v03,
        f"CREATE ROLE {role} LOGIN PASSWORD 'reader-pw';"
        f"ALTER ROLE {role} SET default_transaction_read_only = on;"
        f"REVOKE ALL ON DATABASE {db} FROM PUBLIC;"
        f"GRANT CONNECT ON DATABASE {db} TO {role};"
        f"GRANT SELECT ON ALL TABLES IN SCHEMA public TO {role};",
    )
    yield with_params(v03, user=role, password="reader-pw")
    execute(v03, f"REVOKE ALL ON ALL TABLES IN SCHEMA public FROM {role}")
    with connection(pg_admin_dsn, autocommit=True) as conn:
        conn.execute(f"REVOKE ALL ON DATABASE {db} FROM {role}")
        conn.execute(f"GRANT CONNECT, TEMP ON DATABASE {db} TO PUBLIC")
        conn.execute(f"DROP ROLE {role}")


def _text(cursor: psycopg.Cursor[Any], query: Any) -> str:
    if isinstance(query, bytes):
        return query.decode()
    if isinstance(query, str):
        return query
    return str(query.as_string(cursor))


def test_the_target_is_only_read(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    v03: str,
    reader_dsn: str,
    pg_admin_dsn: str,
) -> None:
    with connection(reader_dsn) as conn:
        rights = conn.execute(
            "SELECT rolsuper, rolcreatedb, has_database_privilege(current_database(), 'CREATE'),"
            " has_database_privilege(current_database(), 'TEMP'),"
            " has_table_privilege('tasks', 'INSERT'), has_table_privilege('tasks', 'SELECT'),"
            " current_setting('default_transaction_read_only') "
            "FROM pg_roles WHERE rolname = current_user"
        ).fetchone()
    assert rights == (False, False, False, False, False, True, "on")
    catalog_before, rows_before = fingerprint(v03), _row_counts(v03)
    assert sum(rows_before.values()) > 0

    target = scratch.dbname_of(v03)
    sent: list[str] = []
    processes: list[tuple[str, str, int]] = []
    real_execute, real_copy, real_run = psycopg.Cursor.execute, psycopg.Cursor.copy, tools.run

    def execute_(self: psycopg.Cursor[Any], query: Any, params: Any = None, **kw: Any) -> Any:
        if self.connection.info.dbname == target:
            sent.append(_text(self, query))
        return real_execute(self, query, params, **kw)

    def copy_(self: psycopg.Cursor[Any], statement: Any, params: Any = None, **kw: Any) -> Any:
        if self.connection.info.dbname == target:
            sent.append(_text(self, statement))
        return real_copy(self, statement, params, **kw)

    def run_(program: str, dsn: str, *args: Any, **kw: Any) -> Any:
        done = real_run(program, dsn, *args, **kw)
        processes.append((program, dsn, done.returncode))
        return done

    monkeypatch.setattr(psycopg.Cursor, "execute", execute_)
    monkeypatch.setattr(psycopg.Cursor, "copy", copy_)
    monkeypatch.setattr(tools, "run", run_)
    doc = _plan_json(capsys, "--dsn", reader_dsn, "--scratch-dsn", pg_admin_dsn)
    monkeypatch.undo()

    assert (doc["current"], doc["target"]) == ("003", "004")
    assert sent, "nothing was read from the target"
    writes = [
        q
        for q in sent
        if not (_READ.match(_COMMENTS.sub("", q, count=1)) or _COPY_OUT.match(q.strip()))
    ]
    assert not writes, writes
    assert any(_COPY_OUT.match(q.strip()) for q in sent)  # the sample's rows
    dumps = [(dsn, code) for program, dsn, code in processes if program == "pg_dump"]
    assert len(dumps) == 2 and all(dsn == reader_dsn and code == 0 for dsn, code in dumps)
    assert fingerprint(v03) == catalog_before
    assert _row_counts(v03) == rows_before


# 2. our own set ------------------------------------------------------------------------------
def test_our_own_set_bills_004_and_leaves_no_scratch_database(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    v03: str,
    pg_admin_dsn: str,
) -> None:
    created: list[str] = []
    real_create = scratch.ScratchDatabases.create

    def create(self: scratch.ScratchDatabases, template: str | None = None) -> str:
        dsn = real_create(self, template)
        created.append(scratch.dbname_of(dsn))
        return dsn

    monkeypatch.setattr(scratch.ScratchDatabases, "create", create)
    doc = _plan_json(capsys, "--dsn", v03)  # the scratch copy on the target's server
    assert (doc["format"], doc["current"], doc["target"]) == ("queueguard", "003", "004")
    assert [r["id"] for r in doc["revisions"]] == ["004"]
    budget = _strongest(_statements(doc, "004"))
    want = {"tasks": AEL, "task_queues": AEL, "runtime_protocol": AEL, "executions": ASL}
    assert {rel: budget.get(rel) for rel in want} == want
    assert doc["ok"] and doc["maxLockMs"] is None
    assert created and all(name.startswith("qgplan_") for name in created)
    assert not set(created) & _scratch_names(pg_admin_dsn)


# 3. each format ------------------------------------------------------------------------------
def test_temporal_set_in_version_order_and_after_its_bookkeeping(
    capsys: pytest.CaptureFixture[str], empty_db: str, pg_admin_dsn: str
) -> None:
    folder = str(DATA / "temporal")
    common = ("--migrations", folder, "--dsn", empty_db, "--scratch-dsn", pg_admin_dsn)
    doc = _plan_json(capsys, *common)
    assert (doc["format"], doc["current"], doc["target"]) == ("temporal", None, "1.10")
    assert [r["id"] for r in doc["revisions"]] == ["0.1", "0.2", "1.0", "1.9", "1.10"]
    assert _statements(doc, "1.0") == []
    assert {"walks_started_at_idx"} <= set(_statements(doc, "0.2")[1]["created"])

    mset = load(DATA / "temporal")
    with connection(empty_db) as conn:
        temporal_format.setup(conn)
        previous = temporal_format.INITIAL_VERSION
        for revision in mset.revisions[:2]:
            for statement in revision.statements or ():
                conn.execute(statement)  # type: ignore[arg-type]
            temporal_format.record(conn, revision, previous)
            previous = revision.id
        conn.commit()
    doc = _plan_json(capsys, *common)
    assert (doc["current"], doc["target"]) == ("0.2", "1.10")
    assert [r["id"] for r in doc["revisions"]] == ["1.0", "1.9", "1.10"]
    doc = _plan_json(capsys, *common, "--to", "v1.9")
    assert doc["target"] == "1.9"
    assert [r["id"] for r in doc["revisions"]] == ["1.0", "1.9"]


def test_alembic_project(
    capsys: pytest.CaptureFixture[str], empty_db: str, pg_admin_dsn: str
) -> None:
    project = str(DATA / "alembic_plain")
    doc = _plan_json(
        capsys, "--migrations", project, "--dsn", empty_db, "--scratch-dsn", pg_admin_dsn
    )
    assert (doc["format"], doc["current"]) == ("alembic", None)
    ids = [r["id"] for r in doc["revisions"]]
    assert ids == ["1a0c5e7f2b01", "2b1d6f803c02", "3c2e70914d03"] and doc["target"] == ids[-1]
    first = [s["sql"] for s in _statements(doc, ids[0])]
    assert any("CREATE TABLE item" in q for q in first)
    assert any(q.lstrip().startswith("INSERT INTO item") for q in first), first  # bulk_insert
    data = _statements(doc, ids[1])
    updates = [s for s in data if s["sql"].startswith("UPDATE item SET label")]
    assert updates and all(s["transactional"] for s in updates)
    (concurrently,) = _statements(doc, ids[2])
    assert concurrently["sql"].startswith("CREATE INDEX CONCURRENTLY")
    assert concurrently["transactional"] is False
    assert concurrently["created"] == ["ix_item_label"]
    assert concurrently["locks"] == [{"relation": "item", "mode": SUEL}]


def test_a_revision_sending_nothing_on_postgresql_costs_nothing(
    capsys: pytest.CaptureFixture[str], empty_db: str, pg_admin_dsn: str, tmp_path: Path
) -> None:
    """A dialect branch for another database sends nothing here: no statement, no cost."""
    import shutil

    project = tmp_path / "project"
    shutil.copytree(DATA / "alembic_attrs", project)
    (project / "versions" / "c3.py").write_text(
        '"""mssql only"""\n\nfrom alembic import op\n\nrevision = "c3"\ndown_revision = "b2"\n'
        "branch_labels = None\ndepends_on = None\n\n\ndef upgrade() -> None:\n"
        '    if op.get_bind().dialect.name == "mssql":\n'
        '        op.execute("ALTER TABLE account ALTER COLUMN email NVARCHAR(320)")\n'
    )
    argv = ["--migrations", str(project), "--dsn", empty_db, "--scratch-dsn", pg_admin_dsn]
    doc = _plan_json(capsys, *argv)
    assert [r["id"] for r in doc["revisions"]] == ["a1", "b2", "c3"]
    assert _statements(doc, "c3") == []
    code, out, _ = _run(capsys, *argv)
    assert code == 0 and "revision c3: no statement on PostgreSQL" in out
    assert "(no statement)" not in out


# 4. --max-lock and bad input ---------------------------------------------------------------
def test_max_lock_exceeded_names_the_statement(
    capsys: pytest.CaptureFixture[str], accounts: str, rewrite_set: Path, pg_admin_dsn: str
) -> None:
    common = ("--migrations", str(rewrite_set), "--dsn", accounts, "--scratch-dsn", pg_admin_dsn)
    code, out, err = _run(capsys, *common, "--max-lock", "0ms", "--sample-rows", "500")
    assert code == 1, err
    assert "revision 001 statement 1: AccessExclusiveLock on account held ~" in out
    assert REWRITE in out and "runs ~" in out and "exceeds-max-lock" in out
    assert "safer: add a new column, backfill it in batches" in out

    code, out, err = _run(capsys, *common, "--max-lock", "0ms", "--sample-rows", "500", "--json")
    assert code == 1, err
    doc = json.loads(out)
    _check_shape(doc)
    assert doc["ok"] is False and doc["maxLockMs"] == 0 and doc["sampleRows"] == 500
    (line,) = _statements(doc, "001")
    assert line["sql"] == REWRITE and line["verdict"] == "exceeds-max-lock"
    assert line["locks"] == [{"relation": "account", "mode": AEL}]
    assert line["rewrites"] == ["account"] and line["safer"]
    assert line["basis"].startswith("rewrites account: ") and "target 3000 rows" in line["basis"]
    assert line["estimate_ms"] > 0 and line["held_ms"] >= line["estimate_ms"]

    # (durations take ms, s or m: an hour is 60m)
    code, out, err = _run(capsys, *common, "--max-lock", "60m", "--sample-rows", "500")
    assert code == 0, err
    assert "every blocking lock is held under --max-lock 60.0 min" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("--max-lock", "soon"), "bad duration 'soon'"),
        (("--sample-rows", "0"), "--sample-rows must be at least 1"),
        (("--to", "999"), "--to takes a revision of"),
        (("--format", "temporal"), "no version folders"),
        (("--format", "nonsense"), "invalid choice"),
    ],
)
def test_bad_input_is_a_usage_error(
    capsys: pytest.CaptureFixture[str],
    accounts: str,
    rewrite_set: Path,
    argv: tuple[str, ...],
    message: str,
) -> None:
    code, out, err = _run(capsys, "--migrations", str(rewrite_set), "--dsn", accounts, *argv)
    assert code == 2 and not out
    assert message in err


def test_a_folder_that_is_no_migration_set(
    capsys: pytest.CaptureFixture[str], accounts: str, tmp_path: Path
) -> None:
    (tmp_path / "README.txt").write_text("not migrations\n")
    code, out, err = _run(capsys, "--migrations", str(tmp_path), "--dsn", accounts)
    assert code == 2 and not out
    assert "not a migration set queueguard can read" in err and "--format" in err


# 5. sessions the statement would queue behind ----------------------------------------------
def test_a_session_holding_a_lock_shows_in_waits_behind(
    capsys: pytest.CaptureFixture[str],
    accounts: str,
    rewrite_set: Path,
    pg_admin_dsn: str,
) -> None:
    with psycopg.connect(accounts) as holder:
        holder.execute("SELECT count(*) FROM account").fetchone()  # AccessShareLock, kept open
        pid = holder.info.backend_pid
        doc = _plan_json(
            capsys,
            "--migrations",
            str(rewrite_set),
            "--dsn",
            accounts,
            "--scratch-dsn",
            pg_admin_dsn,
            "--sample-rows",
            "500",
        )
        holder.rollback()
    (line,) = _statements(doc, "001")
    assert line["verdict"] == "blocks-reads"
    (waits,) = [w for w in line["waits_behind"] if w["pid"] == pid]
    assert (waits["relation"], waits["mode"]) == ("account", ASL)
    assert waits["age_ms"] >= 0 and waits["state"] == "idle in transaction"
    assert "SELECT count(*) FROM account" in waits["query"]


# 6. the pull-request comment -------------------------------------------------------------------
def test_the_markdown_comment_shows_what_the_json_document_holds(
    capsys: pytest.CaptureFixture[str], accounts: str, rewrite_set: Path, pg_admin_dsn: str
) -> None:
    from tests.report.markdown_cells import sql_mode, table_under

    common = ("--migrations", str(rewrite_set), "--dsn", accounts, "--scratch-dsn", pg_admin_dsn)
    code, comment, err = _run(capsys, *common, "--sample-rows", "500", "--output", "markdown")
    assert code == 0, err
    doc = _plan_json(capsys, *common, "--sample-rows", "500")
    ((statement,),) = [r["statements"] for r in doc["revisions"]]
    (row,) = table_under(comment, "Revision 001").rows
    assert row[1].code == [statement["sql"]]
    assert (row[2].text, row[3].text) == ("account", sql_mode(AEL))
    assert row[6].text.startswith("rewrites account: ")  # the figures are this run's own
    assert (row[7].text, row[8].text) == ("rewrites account", "blocks-reads")
    assert comment.startswith("### ⚠️ queueguard plan: 1 statement blocking reads, 1 table")
    assert comment.rstrip().endswith("<!-- queueguard:plan -->")

    code, out, err = _run(capsys, *common, "--json", "--output", "markdown")
    assert code == 2 and not out and "--json is --output json" in err
