"""sets.alembic on two small Alembic projects of our own (tests/sets/data/): one laid out by
`alembic init` (ini at the root, fileConfig, its own engine), one that runs on the caller's
connection and keeps a custom version table."""

from __future__ import annotations

import hashlib
import io
import logging
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest
import sqlalchemy as sa
from alembic import command
from psycopg.pq import TransactionStatus

from queueguard.errors import MigrationError, UsageError
from queueguard.sets import alembic as fmt
from queueguard.sets.alembic_config import config
from queueguard.sets.alembic_dsn import sqlalchemy_url
from queueguard.sets.alembic_version_table import VersionTable, is_bookkeeping, version_table

DATA = Path(__file__).parent / "data"
PLAIN = DATA / "alembic_plain"
ATTRS = DATA / "alembic_attrs"
PLAIN_IDS = ("1a0c5e7f2b01", "2b1d6f803c02", "3c2e70914d03")


@dataclass
class Seen:
    sql: str
    bookkeeping: bool
    autocommit: bool
    #: transaction status right after the statement: INTRANS inside a transaction, IDLE when
    #: it ran in autocommit (before the first statement of a transaction it is IDLE too)
    after_status: TransactionStatus
    error: BaseException | None
    lock_timeout: str


class Recorder:
    def __init__(self, table: str) -> None:
        self.table = table
        self.seen: list[Seen] = []
        self.pending: dict[str, tuple[bool, str]] = {}
        #: locks the connection held right after the data migration's first UPDATE
        self.update_locks: set[tuple[str, str]] = set()

    def before(self, raw: psycopg.Connection[Any], sql: str) -> None:
        self.pending[sql] = (raw.autocommit, self._query(raw, "SHOW lock_timeout")[0][0])

    def after(
        self, raw: psycopg.Connection[Any], sql: str, seconds: float, error: BaseException | None
    ) -> None:
        assert seconds >= 0
        autocommit, lock_timeout = self.pending.pop(sql)
        status = raw.info.transaction_status
        if sql.lstrip().startswith("UPDATE item") and not self.update_locks:
            # a hook may query on the revision's own connection, inside its transaction
            rows = self._query(
                raw,
                "SELECT c.relname, l.mode FROM pg_locks l JOIN pg_class c ON c.oid = l.relation"
                " WHERE l.pid = pg_backend_pid() AND c.relname = 'item'",
            )
            self.update_locks = {(r[0], r[1]) for r in rows}
        bookkeeping = is_bookkeeping(sql, self.table)
        # SQLAlchemy sends DDL with surrounding newlines and tabs: compare on one line
        flat = " ".join(sql.split())
        self.seen.append(Seen(flat, bookkeeping, autocommit, status, error, lock_timeout))

    @staticmethod
    def _query(raw: psycopg.Connection[Any], sql: str) -> list[tuple[Any, ...]]:
        with raw.cursor() as cursor:
            cursor.execute(sql)
            return cursor.fetchall()

    def revision_sql(self) -> list[str]:
        return [s.sql for s in self.seen if not s.bookkeeping]


def alembic_current(root: Path, dsn: str, **attributes: Any) -> str:
    """What `alembic current` prints for the database."""
    cfg = config(root, dsn, **attributes)
    command.current(cfg)
    out = cfg.stdout
    assert isinstance(out, io.StringIO)
    return out.getvalue().strip()


# --- pure --------------------------------------------------------------------------------


def test_detect() -> None:
    assert fmt.detect(PLAIN)  # by its alembic.ini
    assert fmt.detect(PLAIN / "migrations")  # the script directory itself
    assert fmt.detect(ATTRS)  # no ini at all
    assert not fmt.detect(DATA)
    assert not fmt.detect(PLAIN / "alembic.ini")


def test_an_ini_names_its_script_directory_relative_to_itself(tmp_path: Path) -> None:
    (tmp_path / "alembic.ini").write_text("[alembic]\nscript_location = %(here)s/nowhere\n")
    assert not fmt.detect(tmp_path)
    with pytest.raises(UsageError, match="not an Alembic folder"):
        config(tmp_path, None)
    # a relative script_location: relative to the ini's folder, wherever we run from
    shutil.copytree(ATTRS, tmp_path / "db" / "alembic")
    (tmp_path / "alembic.ini").write_text("[alembic]\nscript_location = db/alembic\n")
    assert fmt.detect(tmp_path)
    cfg = config(tmp_path, None)
    assert cfg.get_main_option("script_location") == str((tmp_path / "db/alembic").resolve())
    assert fmt.load(tmp_path).ids == ("a1", "b2")


def test_a_folder_with_env_py_and_versions_is_the_script_location(tmp_path: Path) -> None:
    """Whatever an ini's script_location says: the ini inside the folder is read for its
    other options; one in the parent folder only when it names this folder."""
    project = tmp_path / "app" / "migrations"
    shutil.copytree(ATTRS, project)
    (project / "alembic.ini").write_text(
        "[alembic]\nscript_location = somewhere/else/entirely\nversion_table = from_ini\n"
    )
    cfg = config(project, None)
    assert cfg.config_file_name == str(project / "alembic.ini")
    assert cfg.get_main_option("script_location") == str(project)
    assert cfg.get_main_option("version_table") == "from_ini"
    (project / "alembic.ini").unlink()
    # a parent ini naming another project's folder is not this one's
    (tmp_path / "app" / "alembic.ini").write_text("[alembic]\nscript_location = other\n")
    assert config(project, None).config_file_name is None
    (tmp_path / "app" / "alembic.ini").write_text("[alembic]\nscript_location = migrations\n")
    assert config(project, None).config_file_name == str(tmp_path / "app" / "alembic.ini")


def test_an_env_py_calling_file_config_leaves_the_hosts_logging_alone() -> None:
    host = logging.getLogger("queueguard.test.host")
    # loggers are process-wide: a test that ran Alembic's own `command.current` (its env.py's
    # fileConfig, outside queueguard) in this process before has disabled it already
    host.disabled = False
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    fmt.load(PLAIN)  # its env.py calls fileConfig, which disables existing loggers
    assert not host.disabled
    assert root.handlers == handlers and root.level == level


def test_load_plain() -> None:
    migrations = fmt.load(PLAIN)
    assert migrations.format == "alembic"
    assert migrations.ids == PLAIN_IDS
    assert [r.down for r in migrations.revisions] == [None, *PLAIN_IDS[:-1]]
    assert [r.title for r in migrations.revisions] == [
        "create item",
        "item label, filled from the name",
        "index the label concurrently",
    ]
    first = migrations.revisions[0]
    assert first.files == (PLAIN / "migrations/versions/1a0c5e7f2b01_create_item.py",)
    assert first.checksum == hashlib.sha256(first.files[0].read_bytes()).hexdigest()
    assert all(r.statements is None for r in migrations.revisions)
    assert migrations.bookkeeping == frozenset({"alembic_version"})


def test_load_attrs_learns_the_custom_version_table() -> None:
    migrations = fmt.load(ATTRS)
    assert migrations.ids == ("a1", "b2")
    assert migrations.bookkeeping == frozenset({"schema_rev"})
    assert version_table(ATTRS) == VersionTable("schema_rev")


def test_config_keeps_a_password_with_percent_and_at() -> None:
    for dsn in (
        "postgresql://app:p%25ss%40word@db.example:6543/shop?sslmode=require",
        "host=db.example port=6543 user=app password='p%ss@word' dbname=shop sslmode=require",
    ):
        cfg = config(PLAIN, dsn)
        # read back through ConfigParser, as env.py's engine_from_config does
        section = cfg.get_section(cfg.config_ini_section, {})
        for value in (cfg.get_main_option("sqlalchemy.url"), section["sqlalchemy.url"]):
            assert value is not None
            url = sa.make_url(value)
            assert url.drivername == "postgresql+psycopg"
            assert (url.username, url.password) == ("app", "p%ss@word")
            assert (url.host, url.port, url.database) == ("db.example", 6543, "shop")
            assert url.query["sslmode"] == "require"
        assert cfg.config_file_name == str((PLAIN / "alembic.ini").resolve())
        assert cfg.get_main_option("script_location") == str((PLAIN / "migrations").resolve())


def test_config_url_carries_socket_folders_options_and_the_connection() -> None:
    dsn = "host=/tmp/pg-sock port=5433 dbname=x options='-c search_path=app'"
    url = sqlalchemy_url(dsn, "-c lock_timeout=5000")
    assert url.host is None and url.query["host"] == "/tmp/pg-sock"
    assert url.query["port"] == "5433"
    assert url.query["options"] == "-c search_path=app -c lock_timeout=5000"
    marker = object()
    cfg = config(ATTRS, dsn, connection=marker)
    assert cfg.attributes["connection"] is marker
    assert cfg.config_file_name is None  # no alembic.ini here or above
    value = cfg.get_main_option("sqlalchemy.url")
    assert value is not None and sa.make_url(value).query["options"] == "-c search_path=app"


@pytest.mark.parametrize(
    ("sql", "table", "expected"),
    [
        ("CREATE TABLE alembic_version (\n\tversion_num VARCHAR(32) NOT NULL)", None, True),
        ("INSERT INTO alembic_version (version_num) VALUES ('a')", None, True),
        (
            "UPDATE alembic_version SET version_num='b' WHERE alembic_version.version_num='a'",
            None,
            True,
        ),
        ("SELECT alembic_version.version_num \nFROM alembic_version", None, True),
        ("DELETE FROM alembic_version WHERE version_num = 'a'", None, True),
        ("SELECT pg_catalog.pg_class.relname \nFROM pg_catalog.pg_class JOIN x", None, True),
        ("UPDATE \"Schema_Rev\" SET version_num = 'b'", "Schema_Rev", True),
        ("INSERT INTO ops.schema_rev (version_num) VALUES ('a')", "ops.schema_rev", True),
        ("INSERT INTO other.schema_rev (version_num) VALUES ('a')", "ops.schema_rev", False),
        ("INSERT INTO schema_rev (version_num) VALUES ('a')", None, False),
        ("UPDATE item SET label = %(label)s WHERE id = %(id)s", None, False),
        ("CREATE INDEX CONCURRENTLY ix ON alembic_version_log (x)", None, False),
        ("CREATE TABLE alembic_version_log (x int)", None, False),
        ("SELECT count(*) FROM item WHERE note = 'FROM alembic_version'", None, False),
    ],
)
def test_is_bookkeeping(sql: str, table: str | None, expected: bool) -> None:
    assert is_bookkeeping(sql, table or fmt.DEFAULT_VERSION_TABLE) is expected


def _with_revision(tmp_path: Path, name: str, body: str) -> Path:
    root = tmp_path / "project"
    shutil.copytree(ATTRS, root)
    (root / "versions" / f"{name}.py").write_text(body)
    return root


def _revision(rev: str, down: str | tuple[str, ...], upgrade: str = "pass") -> str:
    return (
        f'"""{rev}"""\n\nfrom alembic import op\n\nrevision = {rev!r}\n'
        f"down_revision = {down!r}\nbranch_labels = None\ndepends_on = None\n\n\n"
        f"def upgrade() -> None:\n    {upgrade}\n"
    )


# --- on the server -----------------------------------------------------------------------


def test_run_plain_one_revision_at_a_time(empty_db: str) -> None:
    migrations = fmt.load(PLAIN)
    table = next(iter(migrations.bookkeeping))
    assert fmt.current(empty_db, table) is None
    recorders: dict[str, Recorder] = {}
    for revision in migrations.revisions:
        recorder = recorders[revision.id] = Recorder(table)
        fmt.run(
            PLAIN,
            empty_db,
            revision.id,
            before=recorder.before,
            after=recorder.after,
            options="-c lock_timeout=4321",
        )
        assert fmt.current(empty_db, table) == revision.id
        assert alembic_current(PLAIN, empty_db) == f"{revision.id}" + (
            " (head)" if revision is migrations.head else ""
        )
        assert all(s.lock_timeout == "4321ms" for s in recorder.seen)
        assert all(s.error is None for s in recorder.seen)

    first, second, third = (recorders[i] for i in PLAIN_IDS)
    # the hooks see what each revision sends: Alembic's version-row write is among it, its
    # creation of the version table (before the first revision) and the driver's own
    # queries on connecting are not
    assert [s.sql for s in first.seen if s.bookkeeping] == [
        "INSERT INTO alembic_version (version_num) VALUES ('1a0c5e7f2b01') RETURNING "
        "alembic_version.version_num"
    ]
    assert first.revision_sql()[0].startswith("CREATE TABLE item")
    # the Python data migration: its SELECT and one UPDATE per row, in the revision's transaction
    assert second.revision_sql() == [
        "ALTER TABLE item ADD COLUMN label TEXT",
        "SELECT id, name FROM item ORDER BY id",
        "UPDATE item SET label = %(label)s WHERE id = %(id)s",
        "UPDATE item SET label = %(label)s WHERE id = %(id)s",
    ]
    updates = [s for s in second.seen if s.sql.startswith("UPDATE item")]
    assert all(s.after_status == TransactionStatus.INTRANS and not s.autocommit for s in updates)
    assert ("item", "RowExclusiveLock") in second.update_locks
    assert ("item", "AccessExclusiveLock") in second.update_locks  # the ADD COLUMN's, still held
    # CREATE INDEX CONCURRENTLY ran in Alembic's autocommit block: outside any transaction
    # (SQLAlchemy reads the isolation level on entering it: `show transaction isolation level`)
    (index,) = [s for s in third.seen if not s.bookkeeping and not s.sql.startswith("show ")]
    assert index.sql == "CREATE INDEX CONCURRENTLY ix_item_label ON item (label)"
    assert index.autocommit and index.after_status == TransactionStatus.IDLE
    (version,) = [s for s in third.seen if s.sql.startswith("UPDATE alembic_version")]
    assert version.bookkeeping and version.after_status == TransactionStatus.INTRANS

    with psycopg.connect(empty_db) as conn:
        labels = conn.execute("SELECT label FROM item ORDER BY id").fetchall()
        valid = conn.execute(
            "SELECT indisvalid FROM pg_index WHERE indexrelid = 'ix_item_label'::regclass"
        ).fetchone()
    assert labels == [("Spanner",), ("Wrench",)]
    assert valid == (True,)


def test_run_attrs_on_the_callers_connection(empty_db: str) -> None:
    migrations = fmt.load(ATTRS)
    recorder = Recorder("schema_rev")
    for revision in migrations.revisions:
        fmt.run(ATTRS, empty_db, revision.id, before=recorder.before, after=recorder.after)
        assert fmt.current(empty_db, "schema_rev") == revision.id
    assert recorder.revision_sql() == [
        "CREATE TABLE account ( id BIGSERIAL NOT NULL, email TEXT NOT NULL, PRIMARY KEY (id) )",
        "ALTER TABLE account ADD CONSTRAINT account_email_key UNIQUE (email)",
    ]
    assert fmt.current(empty_db) is None  # no alembic_version table: the default is not it
    engine = sa.create_engine(sqlalchemy_url(empty_db), poolclass=sa.pool.NullPool)
    with engine.connect() as connection:
        assert alembic_current(ATTRS, empty_db, connection=connection) == "b2 (head)"
    engine.dispose()


def test_run_applies_only_the_next_revision(empty_db: str) -> None:
    with pytest.raises(UsageError, match="b2 applies after a1, but the database is at no rev"):
        fmt.run(ATTRS, empty_db, "b2")
    with pytest.raises(UsageError, match="unknown revision 'zz'"):
        fmt.run(ATTRS, empty_db, "zz")
    assert fmt.current(empty_db, "schema_rev") is None


def test_a_failing_statement_reaches_after_with_its_error(tmp_path: Path, empty_db: str) -> None:
    root = _with_revision(tmp_path, "c3", _revision("c3", "b2", 'op.execute("SELECT 1/0")'))
    fmt.run(root, empty_db, "a1")
    fmt.run(root, empty_db, "b2")
    recorder = Recorder("schema_rev")
    with pytest.raises(
        MigrationError,
        match=r"^revision c3 failed \(division by zero\); its transaction rolled back\n"
        r"  SELECT 1/0$",
    ):
        fmt.run(root, empty_db, "c3", before=recorder.before, after=recorder.after)
    failed = recorder.seen[-1]
    assert failed.sql == "SELECT 1/0"
    assert isinstance(failed.error, psycopg.errors.DivisionByZero)
    assert fmt.current(empty_db, "schema_rev") == "b2"  # its transaction rolled back


def test_a_failure_after_an_autocommit_block_says_what_stays(tmp_path: Path, empty_db: str) -> None:
    body = (
        "with op.get_context().autocommit_block():\n"
        '        op.execute("CREATE INDEX CONCURRENTLY account_email ON account (email)")\n'
        '    op.execute("ALTER TABLE account ADD COLUMN n int CHECK (n > 0)")\n'
        "    op.execute(\"INSERT INTO account (email, n) VALUES ('x', 0)\")"
    )
    root = _with_revision(tmp_path, "c3", _revision("c3", "b2", body))
    fmt.run(root, empty_db, "a1")
    fmt.run(root, empty_db, "b2")
    with pytest.raises(MigrationError) as failed:
        fmt.run(root, empty_db, "c3")
    message = str(failed.value)
    assert message.startswith('revision c3 failed (new row for relation "account" violates')
    assert "it ran statements in autocommit_block(): those, and what it ran before" in message
    assert message.endswith("\n  INSERT INTO account (email, n) VALUES ('x', 0)")
    assert fmt.current(empty_db, "schema_rev") == "b2"
    with psycopg.connect(empty_db) as conn:  # the block's index stayed, the column did not
        assert conn.execute("SELECT to_regclass('account_email') IS NOT NULL").fetchone() == (True,)


def test_version_table_of_an_env_py_that_cannot_run_offline(tmp_path: Path, empty_db: str) -> None:
    root = tmp_path / "project"
    shutil.copytree(ATTRS, root)
    env = root / "env.py"
    env.write_text(
        env.read_text().replace(
            "def run_migrations_offline() -> None:\n",
            "def run_migrations_offline() -> None:\n    raise RuntimeError('online only')\n",
        )
    )
    with pytest.raises(UsageError, match=r"env.py failed in offline mode.*online only"):
        version_table(root)
    assert version_table(root, empty_db) == VersionTable("schema_rev")
    with psycopg.connect(empty_db) as conn:  # learnt read-only: nothing was created
        assert conn.execute("SELECT to_regclass('schema_rev')").fetchone() == (None,)


def test_hooks_are_removed_after_a_run(empty_db: str) -> None:
    calls: list[str] = []

    def before(_raw: Any, sql: str) -> None:
        calls.append(sql)

    fmt.run(ATTRS, empty_db, "a1", before=before)
    seen = len(calls)
    assert seen > 0
    engine = sa.create_engine(sqlalchemy_url(empty_db), poolclass=sa.pool.NullPool)
    with engine.connect() as connection:
        connection.execute(sa.text("SELECT 1"))
    engine.dispose()
    assert len(calls) == seen


def test_an_env_py_whose_offline_table_differs_is_caught(tmp_path: Path, empty_db: str) -> None:
    root = tmp_path / "project"
    shutil.copytree(ATTRS, root)
    env = root / "env.py"
    text = env.read_text()
    offline = "        literal_binds=True,\n        version_table=VERSION_TABLE,\n"
    assert offline in text
    env.write_text(text.replace(offline, "        literal_binds=True,\n"))
    assert fmt.load(root).bookkeeping == frozenset({"alembic_version"})
    with pytest.raises(MigrationError, match="configures version table schema_rev online but"):
        fmt.run(root, empty_db, "a1")


@pytest.mark.filterwarnings("ignore:No path_separator found:DeprecationWarning")
def test_prepend_sys_path_is_the_projects_folder_wherever_queueguard_runs(
    tmp_path: Path,
) -> None:
    """`alembic` is run from the project's folder, so `prepend_sys_path = .` means that
    folder; an env.py importing the project's models must find them from any cwd."""
    project = tmp_path / "project"
    shutil.copytree(DATA / "alembic_plain", project)
    ini = project / "alembic.ini"
    ini.write_text(ini.read_text().replace("[alembic]\n", "[alembic]\nprepend_sys_path = . lib\n"))
    cfg = config(project, None)
    assert cfg.get_prepend_sys_paths_list() == [str(project.resolve()), str(project / "lib")]


def test_a_server_side_cursors_query_is_a_statement_too(tmp_path: Path, empty_db: str) -> None:
    """A data migration reading in batches (`yield_per`, `stream_results`: an ORM query
    that walks a large table) has psycopg declare a server-side cursor, which does not go
    through `Cursor.execute`: its query is seen all the same, and checked to be on the
    database queueguard gave env.py."""
    body = (
        "import sqlalchemy as sa\n"
        "    bind = op.get_bind()\n"
        "    rows = bind.execute(\n"
        '        sa.text("SELECT id, email FROM account ORDER BY id"),\n'
        '        execution_options={"yield_per": 1},\n'
        "    )\n"
        "    for row in rows:\n"
        "        bind.execute(\n"
        '            sa.text("UPDATE account SET email = upper(email) WHERE id = :id"),\n'
        '            {"id": row.id},\n'
        "        )"
    )
    root = _with_revision(tmp_path, "c3", _revision("c3", "b2", body))
    fmt.run(root, empty_db, "a1")
    fmt.run(root, empty_db, "b2")
    with psycopg.connect(empty_db) as conn:
        conn.execute("INSERT INTO account (email) VALUES ('a'), ('b')")
    recorder = Recorder("schema_rev")
    fmt.run(root, empty_db, "c3", before=recorder.before, after=recorder.after)
    assert recorder.revision_sql() == [
        "SELECT id, email FROM account ORDER BY id",
        "UPDATE account SET email = upper(email) WHERE id = %(id)s",
        "UPDATE account SET email = upper(email) WHERE id = %(id)s",
    ]
    with psycopg.connect(empty_db) as conn:
        assert conn.execute("SELECT email FROM account ORDER BY id").fetchall() == [("A",), ("B",)]


def test_a_first_revision_altering_the_applications_own_tables_says_where_they_come_from(
    tmp_path: Path, empty_db: str
) -> None:
    """mlflow's pattern: the application runs create_all() and then its revisions, the
    first of which alters a table no revision creates. On an empty database the failure
    says so, and only for the first revision."""
    app = DATA / "alembic_app"
    with pytest.raises(MigrationError) as failed:
        fmt.run(app, empty_db, fmt.load(app).revisions[0].id)
    lines = str(failed.value).splitlines()
    assert lines[0].startswith('revision m1 failed (relation "runs" does not exist)')
    assert lines[-1].startswith("the set's first revision changes objects no revision creates")
    # a later revision missing a table is a plain failure
    body = 'op.execute("ALTER TABLE nowhere ADD COLUMN n int")'
    root = _with_revision(tmp_path, "c3", _revision("c3", "b2", body))
    fmt.run(root, empty_db, "a1")
    fmt.run(root, empty_db, "b2")
    with pytest.raises(MigrationError) as later:
        fmt.run(root, empty_db, "c3")
    assert "no revision creates" not in str(later.value)


_OWN_SETTINGS_ENV_PY = '''"""An application's env.py that migrates from a worker thread, through an
engine built from its own setting (QG_TEST_APP_DB_URL), not the URL or connection given."""
import os
import threading

from alembic import context
from sqlalchemy import create_engine, pool

VERSION_TABLE = "schema_rev"


def run() -> None:
    engine = create_engine(os.environ["QG_TEST_APP_DB_URL"], poolclass=pool.NullPool)
    with engine.connect() as connection:
        context.configure(connection=connection, version_table=VERSION_TABLE)
        with context.begin_transaction():
            context.run_migrations()
        connection.commit()


if context.is_offline_mode():
    context.configure(url="postgresql://", literal_binds=True, version_table=VERSION_TABLE)
    with context.begin_transaction():
        context.run_migrations()
else:
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            run()
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=worker)
    thread.start()
    thread.join()
    if errors:
        raise errors[0]
'''


@pytest.mark.parametrize("elsewhere", ["another database", "sqlite"])
def test_an_env_py_migrating_its_own_database_from_a_worker_thread_is_refused(
    tmp_path: Path,
    make_db: Any,
    monkeypatch: pytest.MonkeyPatch,
    elsewhere: str,
) -> None:
    """Prefect's pattern: env.py runs the revisions in a worker thread, on an engine of the
    application's own settings. The driver-level tap sees neither that thread nor (for an
    async engine) that driver: queueguard reported the database it was given as upgraded
    while env.py had migrated the other one. Now the connection is refused before any
    statement, and neither database is touched."""
    root = tmp_path / "project"
    shutil.copytree(ATTRS, root)
    (root / "env.py").write_text(_OWN_SETTINGS_ENV_PY)
    target, other = make_db(), make_db()
    if elsewhere == "sqlite":
        url = f"sqlite:///{tmp_path / 'app.db'}"
    else:
        url = sqlalchemy_url(other).render_as_string(hide_password=False)
    monkeypatch.setenv("QG_TEST_APP_DB_URL", url)
    with pytest.raises(UsageError, match=r"the project's env\.py connected to"):
        fmt.run(root, target, "a1")
    for dsn in (target, other):
        with psycopg.connect(dsn) as conn:
            assert conn.execute("SELECT to_regclass('account')").fetchone() == (None,)
    assert not (tmp_path / "app.db").exists() or (tmp_path / "app.db").stat().st_size == 0
    # given its own database, the same env.py runs
    monkeypatch.setenv("QG_TEST_APP_DB_URL", sqlalchemy_url(target).render_as_string(False))
    fmt.run(root, target, "a1")
    assert fmt.current(target, "schema_rev") == "a1"


def test_an_env_py_that_runs_only_on_the_callers_connection_is_read_on_the_dsn_given(
    tmp_path: Path, empty_db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Dagster's pattern: env.py raises in both modes unless the caller put a connection in
    config.attributes. The commands given a --dsn learn its version table there (read only)
    instead of refusing with "give a database" while one was given."""
    from queueguard import sets
    from queueguard.cli import main

    root = tmp_path / "project"
    shutil.copytree(ATTRS, root)
    env = root / "env.py"
    env.write_text(
        env.read_text().replace(
            "def run_migrations_offline() -> None:\n",
            "def run_migrations_offline() -> None:\n    raise RuntimeError('connection only')\n",
        )
    )
    with pytest.raises(UsageError, match=r"connection only.*give a database \(--dsn\)"):
        sets.load(root)
    assert sets.load(root, dsn=empty_db).bookkeeping == frozenset({"schema_rev"})
    assert main(["status", "--migrations", str(root), "--dsn", empty_db]) == 0
    assert "pending   a1, b2" in capsys.readouterr().out
    assert main(["upgrade", "--migrations", str(root), "--dsn", empty_db, "--to", "b2"]) == 0
    assert fmt.current(empty_db, "schema_rev") == "b2"


def test_queueguards_own_connections_elsewhere_meanwhile_are_not_env_pys(make_db: Any) -> None:
    """While env.py runs on one database, queueguard itself may read another in another
    thread (the online proof runs its two sides at once): its own engines are left alone,
    an engine made by anyone else on another database is refused."""
    import threading

    from queueguard.sets.alembic_dsn import _connected
    from queueguard.sets.alembic_tap import tapped

    mine, other = make_db(), make_db()
    results: dict[str, object] = {}

    def elsewhere() -> None:
        with _connected(other) as connection:
            results["own"] = connection.execute(sa.text("SELECT current_database()")).scalar()
        engine = sa.create_engine(sqlalchemy_url(other), poolclass=sa.pool.NullPool)
        try:
            with engine.connect():
                results["foreign"] = "connected"
        except UsageError as exc:
            results["foreign"] = str(exc)
        finally:
            engine.dispose()

    with tapped(mine):
        thread = threading.Thread(target=elsewhere)
        thread.start()
        thread.join()
    assert results["own"] == psycopg.conninfo.conninfo_to_dict(other)["dbname"]
    assert str(results["foreign"]).startswith("the project's env.py connected to database")
