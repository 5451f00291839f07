"""Lock budgets: a revision that takes other locks than it declares fails upgrade, verify and
lint (each naming the table); the shipped revisions pass all three; the docs' lock table and
preflight's lock findings come from the same budgets."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest

from queueguard import cli, revisions
from queueguard.engine import locks
from queueguard.lint.model import SqlFile
from queueguard.lint.rules.lock_budget import statement_locks
from queueguard.queue_schema.preflight import preflight
from queueguard.resources import migrations_dir

from .conftest import rows

WIDEN_EXECUTIONS = "LOCK TABLE executions IN ACCESS EXCLUSIVE MODE;\n"


def _copy(tmp_path: Path, edit: Callable[[Path], None]) -> Path:
    """An edited copy of the migration set with its manifest regenerated (as an author or a
    mutation tool would produce it)."""
    root = tmp_path / "migrations"
    shutil.copytree(migrations_dir(), root, ignore=shutil.ignore_patterns("__pycache__"))
    edit(root)
    assert cli.main(["manifest", "--write", "--migrations", str(root)]) == 0
    return root


def _append(step: str, sql: str) -> Callable[[Path], None]:
    def edit(root: Path) -> None:
        path = root / "sql" / "004" / step
        path.write_text(path.read_text() + sql)

    return edit


def _drop_line(step: str, line: str) -> Callable[[Path], None]:
    def edit(root: Path) -> None:
        path = root / "sql" / "004" / step
        text = path.read_text()
        assert line in text
        path.write_text(text.replace(line, ""))

    return edit


@pytest.fixture
def widened(tmp_path: Path) -> Path:
    return _copy(tmp_path, _append("00_locks.sql", WIDEN_EXECUTIONS))


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_a_widened_lock_fails_upgrade_and_changes_nothing(
    capsys: pytest.CaptureFixture[str], widened: Path, queueguard_database: Callable[..., str]
) -> None:
    dsn = queueguard_database(fixture="v0.3")
    before = rows(dsn, "SELECT physical_queue, task_id, data FROM tasks ORDER BY 1, 2")
    code, _, err = _run(capsys, "upgrade", "--dsn", dsn, "--migrations", str(widened))
    assert code == 1
    assert "takes ACCESS EXCLUSIVE on executions (budget ACCESS SHARE)" in err
    assert rows(dsn, "SELECT version_num FROM queueguard_version") == [("003",)]
    assert rows(dsn, "SELECT physical_queue, task_id, data FROM tasks ORDER BY 1, 2") == before
    # the shipped 004 passes on the same data
    assert _run(capsys, "upgrade", "--dsn", dsn)[0] == 0


def test_a_widened_lock_fails_verify_and_lint(
    capsys: pytest.CaptureFixture[str], widened: Path
) -> None:
    code, _, err = _run(capsys, "verify", "--migrations", str(widened), "--fixture", "v0.3")
    assert code == 1 and "executions" in err
    code, out, _ = _run(capsys, "lint", "--migrations", str(widened), "--json")
    findings = json.loads(out)["findings"]
    assert code == 1
    assert [(f["code"], Path(f["file"]).name, f["line"]) for f in findings] == [
        ("migration.lock_budget", "00_locks.sql", 12)
    ]
    assert (
        "ACCESS EXCLUSIVE on executions, above its lock budget (ACCESS SHARE)"
        in (findings[0]["message"])
    )


def test_a_missing_lock_fails_upgrade_and_lint(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, queueguard_database: Callable[..., str]
) -> None:
    """Exact, not a ceiling: without its LOCK, 004 still writes runtime_protocol (ROW
    EXCLUSIVE), but the documented lock order no longer protects writers."""
    root = _copy(
        tmp_path,
        _drop_line("00_locks.sql", "LOCK TABLE runtime_protocol IN ACCESS EXCLUSIVE MODE;\n"),
    )
    dsn = queueguard_database(fixture="v0.3")
    code, _, err = _run(capsys, "upgrade", "--dsn", dsn, "--migrations", str(root))
    assert code == 1
    assert "takes ROW EXCLUSIVE on runtime_protocol (budget ACCESS EXCLUSIVE)" in err
    code, out, _ = _run(capsys, "lint", "--migrations", str(root), "--json")
    messages = [f["message"] for f in json.loads(out)["findings"]]
    assert code == 1
    assert (
        "the lock budget declares ACCESS EXCLUSIVE on runtime_protocol, but the steps take at "
        "most ROW EXCLUSIVE" in messages
    )


def test_the_shipped_revisions_stay_within_their_budgets(
    capsys: pytest.CaptureFixture[str], queueguard_database: Callable[..., str]
) -> None:
    dsn = queueguard_database()
    assert cli.main(["upgrade", "--dsn", dsn]) == 0  # 001..004, each checked before commit
    assert "004 locks within budget: ACCESS EXCLUSIVE on runtime_protocol" in (
        capsys.readouterr().err
    )
    assert cli.main(["lint", "--json"]) == 0


def test_the_docs_lock_table_is_the_budgets() -> None:
    text = (Path(__file__).parents[1] / "docs" / "migrations.md").read_text()
    found = re.search(r"<!-- lock-budgets:start -->\n(.*?)\n<!-- lock-budgets:end -->", text, re.S)
    expected = locks.markdown(revisions.packaged())
    assert found is not None and found.group(1) == expected, f"docs/migrations.md:\n{expected}"


def test_preflight_reports_the_budget_and_only_conflicting_holders(
    queueguard_database: Callable[..., str],
) -> None:
    dsn = queueguard_database(fixture="v0.3")
    report = preflight(dsn)
    hold = next(f for f in report.findings if f.code == "estimate.lock_hold")
    assert hold.samples[0]["locks"] == revisions.packaged().get("004").locks
    assert hold.samples[0]["tables"] == ["runtime_protocol", "task_queues", "tasks"]
    with _holding(dsn, "executions", "ROW EXCLUSIVE"):  # History writing: no conflict
        codes = preflight(dsn).codes()
    assert "locks.conflicting_lock" not in codes
    with _holding(dsn, "executions", "SHARE ROW EXCLUSIVE"):  # still compatible with a read
        assert "locks.conflicting_lock" not in preflight(dsn).codes()
    with _holding(dsn, "executions", "EXCLUSIVE"):  # EXCLUSIVE still admits ACCESS SHARE
        assert "locks.conflicting_lock" not in preflight(dsn).codes()
    with _holding(dsn, "executions", "ACCESS EXCLUSIVE"):  # blocks 004's read of executions
        report = preflight(dsn, lock_timeout_ms=200)
    conflict = [f for f in report.findings if f.code == "locks.conflicting_lock"]
    assert [(f.object, f.samples[0]["mode"]) for f in conflict] == [
        ("executions", "AccessExclusiveLock")
    ]


class _holding:
    """A session holding `mode` on `table` for the duration of the block."""

    def __init__(self, dsn: str, table: str, mode: str) -> None:
        self.dsn, self.table, self.mode = dsn, table, mode

    def __enter__(self) -> psycopg.Connection[tuple[object, ...]]:
        self.conn = psycopg.connect(self.dsn)
        self.conn.execute(f"LOCK TABLE {self.table} IN {self.mode} MODE")
        return self.conn

    def __exit__(self, *exc: object) -> None:
        self.conn.rollback()
        self.conn.close()


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("LOCK TABLE tasks;", {"tasks": "ACCESS EXCLUSIVE"}),
        ("LOCK TABLE a, ONLY b IN SHARE MODE;", {"a": "SHARE", "b": "SHARE"}),
        (
            "SELECT * FROM tasks t JOIN task_queues q USING (physical_queue);",
            {"tasks": "ACCESS SHARE", "task_queues": "ACCESS SHARE"},
        ),
        ("SELECT * FROM tasks FOR UPDATE;", {"tasks": "ROW SHARE"}),
        (
            "UPDATE tasks SET data = d.x FROM directive d WHERE d.id = tasks.id;",
            {"tasks": "ROW EXCLUSIVE", "directive": "ACCESS SHARE"},
        ),
        (
            "WITH moved AS (DELETE FROM tasks RETURNING *) INSERT INTO tasks SELECT * FROM moved;",
            {"tasks": "ROW EXCLUSIVE"},
        ),
        ("CREATE INDEX i ON tasks (created_at);", {"tasks": "SHARE"}),
        ("CREATE INDEX CONCURRENTLY i ON tasks (created_at);", {"tasks": "SHARE UPDATE EXCLUSIVE"}),
        ("ALTER TABLE tasks ADD COLUMN p int;", {"tasks": "ACCESS EXCLUSIVE"}),
        ("ALTER TABLE tasks VALIDATE CONSTRAINT c;", {"tasks": "SHARE UPDATE EXCLUSIVE"}),
        ("DROP TABLE tasks;", {"tasks": "ACCESS EXCLUSIVE"}),
        (
            "CREATE TEMP TABLE x ON COMMIT DROP AS SELECT run_id FROM executions;",
            {"executions": "ACCESS SHARE"},
        ),
        (
            "CREATE TABLE c (q text REFERENCES task_queues (physical_queue));",
            {"task_queues": "SHARE ROW EXCLUSIVE"},
        ),
    ],
)
def test_statement_locks_follow_postgresql_lock_table(
    tmp_path: Path, sql: str, expected: dict[str, str]
) -> None:
    path = tmp_path / "step.sql"
    path.write_text(sql + "\n")
    (statement,) = SqlFile.read(path, "migration").statements
    assert statement_locks(statement) == expected


def test_budget_arithmetic() -> None:
    assert locks.combined([{"tasks": "SHARE"}, None, {"tasks": "ACCESS SHARE", "x": "SHARE"}]) == {
        "tasks": "SHARE",
        "x": "SHARE",
    }
    found = locks.violations({"a": "SHARE", "b": "ACCESS SHARE"}, {"a": "SHARE", "c": "SHARE"})
    assert [str(v) for v in found] == [
        "does not take ACCESS SHARE on b (budget ACCESS SHARE)",
        "takes SHARE on c, which is not in its budget",
    ]


@pytest.mark.slow
def test_the_online_path_stays_within_its_ceiling(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, queueguard_database: Callable[..., str]
) -> None:
    """`online_locks` is a ceiling for every transaction of `upgrade --online`: the one that
    takes more rolls back (here expand's window stays shut) naming table, mode and ceiling;
    verify's online check fails the same copy; the shipped online path passes."""
    line = "LOCK TABLE runtime_protocol IN ACCESS EXCLUSIVE MODE;\n"

    def edit(root: Path) -> None:
        path = root / "sql" / "004" / "online" / "rollout.sql"
        text = path.read_text()
        assert text.count(line) == 1
        path.write_text(text.replace(line, line + WIDEN_EXECUTIONS))

    widened_online = _copy(tmp_path, edit)
    dsn = queueguard_database(fixture="v0.3")
    argv = ["upgrade", "--online", "--dsn", dsn, "--migrations", str(widened_online)]
    code, _, err = _run(capsys, *argv)
    assert code == 1
    assert "online path (expand: open the window) broke its lock ceiling" in err
    assert "takes ACCESS EXCLUSIVE on executions (ceiling ACCESS SHARE)" in err
    assert "`online_locks` in versions/004.py" in err
    assert rows(dsn, "SELECT min_protocol, max_protocol FROM runtime_protocol") == [(3, 3)]
    code, out, _ = _run(capsys, "verify", "--migrations", str(widened_online), "--fixture", "v0.3")
    assert code == 1 and "v0.3 online failed" in out and "executions" in out  # a failed check
    assert _run(capsys, "upgrade", "--online", "--dsn", dsn)[0] == 0  # the shipped path


def test_ceiling_arithmetic() -> None:
    ceiling = {"tasks": "ROW EXCLUSIVE", "executions": "ACCESS SHARE"}
    held = {"tasks": "ROW EXCLUSIVE", "executions": "SHARE", "other": "ACCESS SHARE"}
    assert [str(v) for v in locks.above_ceiling(ceiling, held)] == [
        "takes SHARE on executions (ceiling ACCESS SHARE)",
        "takes ACCESS SHARE on other, which is not in its ceiling",
    ]
    assert locks.above_ceiling(ceiling, {"tasks": "ACCESS SHARE"}) == []  # below: fine
