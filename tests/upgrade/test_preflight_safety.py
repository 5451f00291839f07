"""Evidence that preflight is safe on a production database.

- it runs as a role with only CONNECT and SELECT;
- it cannot write even if an audit file were changed to (read-only transaction, one statement
  per file), and the database is left byte-for-byte unchanged;
- the only relation locks it holds are ACCESS SHARE (observed in pg_locks from another
  session while it runs);
- a lock held by someone else or a slow check ends in a blocking `locks.*` finding within the
  configured timeouts, not a hang;
- everything happens in one transaction with transaction-local settings.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator

import psycopg
import pytest

from queueguard.cli import main
from queueguard.pg import scratch
from queueguard.pg.connect import connection
from queueguard.pg.dsn import with_params
from queueguard.queue_schema import audit
from queueguard.queue_schema.preflight import APPLICATION_NAME, PreflightReport, preflight

from .preflight_support import checksums, execute, scalar

HEADER = "-- check:    data.probe (info)\n-- applies-to: 003\n"


def _with_extra(monkeypatch: pytest.MonkeyPatch, name: str, body: str) -> None:
    """Make audit_queries() also return one doctored file (as if someone edited the folder)."""
    real = audit.audit_queries
    extra = audit.AuditQuery(name, HEADER + body, ("003",), "doctored")
    monkeypatch.setattr(audit, "audit_queries", lambda: [*real(), extra])


# a role with CONNECT and SELECT only -------------------------------------------------------------
@pytest.fixture
def reader_dsn(v03_db: str, pg_admin_dsn: str) -> Iterator[str]:
    role = f"qg_reader_{uuid.uuid4().hex[:8]}"
    db = scratch.dbname_of(v03_db)
    execute(
        v03_db,
        f"CREATE ROLE {role} LOGIN PASSWORD 'reader-pw';"
        f"REVOKE ALL ON DATABASE {db} FROM PUBLIC;"
        f"GRANT CONNECT ON DATABASE {db} TO {role};"
        f"GRANT SELECT ON ALL TABLES IN SCHEMA public TO {role};",
    )
    yield with_params(v03_db, user=role, password="reader-pw")
    execute(v03_db, f"REVOKE ALL ON ALL TABLES IN SCHEMA public FROM {role}")
    with connection(pg_admin_dsn, autocommit=True) as conn:
        conn.execute(f"REVOKE ALL ON DATABASE {db} FROM {role}")
        conn.execute(f"DROP ROLE {role}")


def test_runs_as_a_role_with_only_connect_and_select(v03_db: str, reader_dsn: str) -> None:
    with connection(reader_dsn) as conn:
        privileges = conn.execute(
            "SELECT rolsuper, rolcreatedb, rolcreaterole, "
            "has_database_privilege(current_database(), 'CREATE'), "
            "has_database_privilege(current_database(), 'TEMP'), "
            "has_schema_privilege('public', 'CREATE'), "
            "has_table_privilege('tasks', 'INSERT'), has_table_privilege('tasks', 'SELECT') "
            "FROM pg_roles WHERE rolname = current_user"
        ).fetchone()
    assert privileges == (False, False, False, False, False, False, False, True)
    owner = preflight(v03_db)
    before = checksums(v03_db)
    report = preflight(reader_dsn)
    assert report.ok and report.revision == "003"
    assert report.codes() == owner.codes()  # the same checks, the same answers
    assert checksums(v03_db) == before


# it cannot write ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("body", "sqlstate"),
    [
        (
            "INSERT INTO task_queues VALUES ('x/y/workflow/0', 'x', 'y', 'workflow', 0, '', 1, "
            "0, 0) RETURNING 'data.probe', 'info', 'tasks', 1, '[]'::jsonb;",
            "25006",  # read_only_sql_transaction
        ),
        (
            "WITH gone AS (DELETE FROM tasks RETURNING 1) "
            "SELECT 'data.probe', 'info', 'tasks', count(*), '[]'::jsonb FROM gone;",
            "25006",
        ),
        (
            "COMMIT; DELETE FROM tasks; SELECT 'data.probe', 'info', 'tasks', 1, '[]'::jsonb;",
            "42601",  # one statement per file: a smuggled COMMIT never runs
        ),
        ("SELECT 'data.probe', 'info', 'tasks', 1, '[]'::jsonb FROM tasks FOR UPDATE;", "25006"),
        ("SELECT pg_advisory_xact_lock(1), 'info', 'tasks', 1, '[]'::jsonb;", ""),
    ],
    ids=["insert", "writable-cte", "smuggled-commit", "for-update", "bad-shape"],
)
def test_a_doctored_audit_file_cannot_write(
    v03_db: str, monkeypatch: pytest.MonkeyPatch, body: str, sqlstate: str
) -> None:
    _with_extra(monkeypatch, "999_doctored.sql", body)
    before = checksums(v03_db)
    report = preflight(v03_db)
    failed = [f for f in report.findings if f.code == "preflight.query_failed"]
    assert len(failed) == 1 and failed[0].blocking and failed[0].object == "999_doctored.sql"
    assert failed[0].samples[0]["sqlstate"] == sqlstate
    assert not report.ok
    assert checksums(v03_db) == before
    assert "data.payload_shape" not in report.codes()  # the real checks still ran clean
    assert "estimate.rows_rewritten" in report.codes()


def test_a_nextval_is_refused_in_the_read_only_transaction(
    v03_db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    execute(v03_db, "CREATE SEQUENCE probe_seq")
    _with_extra(
        monkeypatch,
        "999_doctored.sql",
        "SELECT 'data.probe', 'info', 'tasks', nextval('probe_seq'), '[]'::jsonb;",
    )
    report = preflight(v03_db)
    failed = [f for f in report.findings if f.code == "preflight.query_failed"]
    assert failed[0].samples[0]["sqlstate"] == "25006"
    assert scalar(v03_db, "SELECT last_value FROM probe_seq") == 1
    assert scalar(v03_db, "SELECT is_called FROM probe_seq") is False


# locks --------------------------------------------------------------------------------------------
def _preflight_pid(dsn: str, deadline: float) -> int:
    while time.monotonic() < deadline:
        pid = scalar(
            dsn,
            f"SELECT pid FROM pg_stat_activity WHERE application_name = '{APPLICATION_NAME}' "
            "AND datname = current_database()",
        )
        if pid:
            return int(pid)
        time.sleep(0.01)
    raise AssertionError("preflight never connected")


def test_only_access_share_locks_are_held(v03_db: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Sampled from another session while a slow check keeps the transaction open."""
    _with_extra(
        monkeypatch,
        "999_slow.sql",
        "SELECT 'data.probe', 'info', 'tasks', count(*), '[]'::jsonb FROM tasks, pg_sleep(1.5);",
    )
    result: list[PreflightReport] = []
    worker = threading.Thread(target=lambda: result.append(preflight(v03_db)))
    worker.start()
    pid = _preflight_pid(v03_db, time.monotonic() + 10)
    seen: set[tuple[str, str]] = set()
    with connection(v03_db, autocommit=True) as observer:
        while worker.is_alive():
            rows = observer.execute(
                "SELECT coalesce(relation::regclass::text, ''), mode FROM pg_locks "
                "WHERE pid = %s AND locktype = 'relation'",
                (pid,),
            ).fetchall()
            seen |= {(r[0], r[1]) for r in rows}
            time.sleep(0.02)
    worker.join()
    assert result and result[0].codes("blocking") == []
    modes = {mode for _, mode in seen}
    assert modes == {"AccessShareLock"}, seen
    assert {"tasks", "task_queues", "executions"} <= {rel for rel, _ in seen}


def test_a_lock_held_elsewhere_is_a_prompt_blocking_finding(v03_db: str) -> None:
    holder = psycopg.connect(v03_db, application_name="dba-maintenance")
    try:
        holder.execute("LOCK TABLE tasks IN ACCESS EXCLUSIVE MODE")
        started = time.monotonic()
        report = preflight(v03_db, lock_timeout_ms=200)
        elapsed = time.monotonic() - started
        code = main(["preflight", "--dsn", v03_db, "--lock-timeout", "200ms"])
    finally:
        holder.close()
    assert elapsed < 5, elapsed  # 200 ms per check that reads tasks, not a hang
    timeouts = [f for f in report.findings if f.code == "locks.lock_timeout"]
    assert timeouts and all(f.blocking and f.object == "tasks" for f in timeouts)
    assert timeouts[0].samples[0]["applicationName"] == "dba-maintenance"
    assert "tasks" in timeouts[0].message and "200 ms" in timeouts[0].message
    conflict = next(f for f in report.findings if f.code == "locks.conflicting_lock")
    assert conflict.object == "tasks" and conflict.samples[0]["mode"] == "AccessExclusiveLock"
    assert code == 1


def test_a_slow_check_is_cancelled_by_statement_timeout(
    v03_db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    _with_extra(
        monkeypatch,
        "999_slow.sql",
        "SELECT 'data.probe', 'info', 'tasks', 1, '[]'::jsonb FROM pg_sleep(30);",
    )
    started = time.monotonic()
    report = preflight(v03_db, statement_timeout_ms=300)
    assert time.monotonic() - started < 5
    finding = next(f for f in report.findings if f.code == "locks.statement_timeout")
    assert finding.blocking and finding.object == "999_slow.sql"
    assert "estimate.rows_rewritten" in report.codes()  # the other checks still ran


# one transaction, transaction-local settings ---------------------------------------------------
def test_one_read_only_transaction_with_local_settings(
    v03_db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    probe = (
        "SELECT 'data.probe', 'info', 'tasks', 1, jsonb_build_array(jsonb_build_object("
        "'xactStart', now(), 'readOnly', current_setting('transaction_read_only'), "
        "'isolation', current_setting('transaction_isolation'), "
        "'lockTimeout', current_setting('lock_timeout'), "
        "'statementTimeout', current_setting('statement_timeout'), "
        "'samples', current_setting('queueguard.samples'), "
        "'parallel', current_setting('max_parallel_workers_per_gather'), "
        "'workMem', current_setting('work_mem'), "
        "'backend', pg_backend_pid()));"
    )
    real = audit.audit_queries
    first = audit.AuditQuery(
        "000_probe.sql", HEADER.replace("data.", "schema.") + probe, ("003",), ""
    )
    last = audit.AuditQuery(
        "999_probe.sql", HEADER.replace("data.", "estimate.") + probe, ("003",), ""
    )
    monkeypatch.setattr(audit, "audit_queries", lambda: [first, *real(), last])
    report = preflight(v03_db, lock_timeout_ms=1234, statement_timeout_ms=5678, samples=7)
    probes = [f.samples[0] for f in report.findings if f.code == "data.probe"]
    assert len(probes) == 2 and probes[0] == probes[1]  # same transaction (same now())
    assert probes[0]["readOnly"] == "on" and probes[0]["isolation"] == "repeatable read"
    assert (probes[0]["lockTimeout"], probes[0]["statementTimeout"]) == ("1234ms", "5678ms")
    assert probes[0]["samples"] == "7" and probes[0]["parallel"] == "0"
    assert probes[0]["workMem"] == "64MB"  # PostgreSQL's default 4MB, raised for the audit


def test_settings_do_not_outlive_the_transaction(v03_db: str) -> None:
    """Through a transaction-pooling proxy the next client gets the server connection as is."""
    with connection(v03_db, autocommit=True) as conn:
        from queueguard.queue_schema import preflight as module

        with conn.cursor() as cur:
            before_work_mem = cur.execute("SHOW work_mem").fetchone()
            cur.execute(module.BEGIN)
            module._set_local(cur, "004", module.Limits(250, 750, 3))
            inside = cur.execute("SHOW lock_timeout").fetchone()
            work_mem = cur.execute("SHOW work_mem").fetchone()
            cur.execute("ROLLBACK")
            after = cur.execute("SHOW lock_timeout").fetchone()
            after_work_mem = cur.execute("SHOW work_mem").fetchone()
            cur.execute(module.BEGIN)
            cur.execute("SET LOCAL work_mem = '256MB'")  # a higher setting is kept
            module._set_local(cur, "004", module.Limits(250, 750, 3))
            kept = cur.execute("SHOW work_mem").fetchone()
            cur.execute("ROLLBACK")
            samples = cur.execute("SELECT current_setting('queueguard.samples', true)").fetchone()
    assert inside == ("250ms",) and after == ("0",)
    assert work_mem == ("64MB",) and after_work_mem == before_work_mem and kept == ("256MB",)
    assert samples is not None and samples[0] in (None, "")


def test_empty_database_gets_no_version_table(empty_db: str) -> None:
    preflight(empty_db)
    assert scalar(empty_db, "SELECT to_regclass('queueguard_version')") is None
    ours = "SELECT count(*) FROM pg_class WHERE relnamespace = 'public'::regnamespace"
    assert scalar(empty_db, ours) == 0
