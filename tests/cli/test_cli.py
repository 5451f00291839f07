"""The `queueguard` command line: JSON documents, exit codes, and bad input that writes nothing."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from queueguard.cli import main
from queueguard.core.history import task_payload
from queueguard.core.keys import PhysicalQueue
from queueguard.core.store import Execution
from queueguard.errors import UsageError
from queueguard.pg.connect import connection
from queueguard.pg.dsn import redact
from queueguard.pg.targets import ENV_DSN, parse_duration_ms
from queueguard.runtime.matching import Matching
from queueguard.stores.postgres import PostgresStore

SECRET = "s3cret"
UNREACHABLE = f"postgresql://u:{SECRET}@127.0.0.1:1/x"


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _table_count(dsn: str) -> int:
    with connection(dsn) as conn:
        row = conn.execute("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'").fetchone()
    assert row is not None
    return int(row[0])


# demo / status / inspect -------------------------------------------------------------------
def _step(steps: list[dict[str, Any]], prefix: str) -> dict[str, Any]:
    (found,) = [s for s in steps if s["step"].startswith(prefix)]
    return found


def test_demo_json_walks_both_stores(capsys: pytest.CaptureFixture[str], head_db: str) -> None:
    code, out, _ = _run(capsys, "demo", "--json", "--dsn", head_db)
    assert code == 0
    doc = json.loads(out)
    assert doc["schemaVersion"] == 1
    for store in ("memory", "postgres"):
        steps = doc[store]
        gap = _step(steps, "dispatch 2 first")["persistedQueue"]
        assert (gap["ack_level"], gap["stored_task_rows"]) == (0, [1, 2, 3]), store
        prefix = _step(steps, "dispatch 1")["persistedQueue"]
        assert (prefix["ack_level"], prefix["stored_task_rows"]) == (2, [3]), store
        reload = _step(steps, "reload")
        assert reload["result"] == 2 and reload["persistedQueue"]["range_id"] == 2, store
        assert reload["loadedQueueProgress"]["ackLevel"] == 2, store


def test_status_json_on_head(capsys: pytest.CaptureFixture[str], head_db: str) -> None:
    code, out, _ = _run(capsys, "status", "--dsn", head_db, "--json")
    assert code == 0
    doc = json.loads(out)
    assert doc["schemaVersion"] == 1
    assert doc["revision"] == "004"
    assert doc["protocol"] == {"min": 4, "max": 4}
    assert doc["drift"] == []


def test_inspect_shows_both_matching_tables(
    capsys: pytest.CaptureFixture[str], head_db: str
) -> None:
    workflow_queue = PhysicalQueue("ns", "orders", "workflow", 0)
    activity_queue = PhysicalQueue("ns", "orders", "activity", 1)
    run_id = str(uuid.uuid4())
    store = PostgresStore(head_db, host_id="cli-test", pool_size=1)
    try:
        store.history.add_execution(Execution(run_id, "ns", "wf-inspect"))
        matching = Matching(store)
        matching.add_task(workflow_queue, task_payload("ns", "wf-inspect", run_id, "workflow", 1))
        matching.add_task(activity_queue, task_payload("ns", "wf-inspect", run_id, "activity", 5))
        matching.add_task(workflow_queue, task_payload("ns", "other", run_id, "workflow", 9))
    finally:
        store.close()

    code, out, _ = _run(capsys, "inspect", "wf-inspect", "--dsn", head_db, "--json")
    assert code == 0
    doc = json.loads(out)
    assert doc["schemaVersion"] == 1 and doc["workflowId"] == "wf-inspect"
    assert [(t["physical_queue"], t["task_id"], t["run_id"], t["kind"]) for t in doc["tasks"]] == [
        (activity_queue.key, 1, run_id, "activity"),
        (workflow_queue.key, 1, run_id, "workflow"),
    ]
    queues = {q["physical_queue"]: q for q in doc["task_queues"]}
    assert set(queues) == {workflow_queue.key, activity_queue.key}
    assert queues[workflow_queue.key]["last_task_id"] == 2
    assert queues[workflow_queue.key]["stored_task_rows"] == 2
    assert queues[activity_queue.key]["range_id"] == 1

    code, out, _ = _run(
        capsys, "inspect", "wf-inspect", "--namespace", "elsewhere", "--dsn", head_db
    )
    assert code == 0 and "orders" not in out


# bad input: exit 2, no password, nothing written ---------------------------------------------
COMMANDS = [("status",), ("inspect", "wf"), ("upgrade",), ("demo",)]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[0])
@pytest.mark.parametrize(
    ("dsn", "mentions"),
    [
        (f"host=x port=notaport password={SECRET}", "host=x port=notaport"),
        (f"host x password={SECRET}", "malformed DSN"),
        ("host=x password='s3 cret", "malformed DSN"),  # unterminated quote: no word leaks
        (UNREACHABLE, "127.0.0.1"),
    ],
    ids=["bad-port", "no-equals", "unterminated-quote", "unreachable"],
)
def test_bad_or_unreachable_dsn_exits_2_without_echoing_the_password(
    capsys: pytest.CaptureFixture[str], command: tuple[str, ...], dsn: str, mentions: str
) -> None:
    code, out, err = _run(capsys, *command, "--dsn", dsn)
    assert code == 2
    assert mentions in err
    for word in (SECRET, "s3 ", "cret"):
        assert word not in out + err
    assert err.count("queueguard: error:") == 1
    # one line (docs/interfaces.md): libpq's indented hint after "Connection refused" too
    assert err.rstrip("\n").splitlines()[-1].startswith("queueguard: error:"), err


def test_upgrade_without_a_target_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(ENV_DSN, raising=False)
    code, out, err = _run(capsys, "upgrade")
    assert code == 2
    assert "--dsn" in err and ENV_DSN in err
    assert out == ""


@pytest.mark.parametrize(
    "options",
    [("--lock-timeout", "abc"), ("--statement-timeout", "5 hours"), ("--to", "007")],
    ids=["lock-timeout", "statement-timeout", "to"],
)
def test_bad_upgrade_options_exit_2_and_write_nothing(
    capsys: pytest.CaptureFixture[str], empty_db: str, options: tuple[str, str]
) -> None:
    code, out, err = _run(capsys, "upgrade", "--dsn", empty_db, *options)
    assert code == 2
    assert options[1] in err
    assert out == ""
    assert _table_count(empty_db) == 0


def test_usage_errors_from_argparse_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(capsys, "upgrade", "--retries", "many")
    assert code == 2 and "--retries" in err
    code, _, _ = _run(capsys, "no-such-command")
    assert code == 2


# helpers ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("dsn", "kept"),
    [
        (f"postgresql://app:{SECRET}@db.example:5432/q", "postgresql://app:***@db.example:5432/q"),
        (f"postgres://:{SECRET}@h/q", "postgres://:***@h/q"),
        (f"postgresql://app:{SECRET}@h1,h2/q?sslmode=require", "@h1,h2/q?sslmode=require"),
        (f"host=h password={SECRET} dbname=q", "host=h password=*** dbname=q"),
        (f"host=h password = {SECRET} dbname=q", "dbname=q"),
        (f"host=h password='{SECRET} x\\'y' dbname=q", "host=h password=*** dbname=q"),
        (f"host=h password='{SECRET} x", "host=h password=***"),
        (f"host=h sslpassword={SECRET} dbname=q", "host=h sslpassword=*** dbname=q"),
        (f"postgresql://h/q?password={SECRET}", "postgresql://h/q?password=***"),
        (f"postgresql://h/q?sslmode=require&password={SECRET}", "?sslmode=require&password=***"),
        (f"cannot connect to host=h password={SECRET}: refused", "cannot connect to host=h"),
    ],
)
def test_redact_hides_every_password_form(dsn: str, kept: str) -> None:
    redacted = redact(dsn)
    assert SECRET not in redacted and " x" not in redacted
    assert kept in redacted


def test_redact_leaves_dsns_without_password_alone() -> None:
    for dsn in ("postgresql://app@h/q", "host=h dbname=q user=app", "postgresql://h/q?user=p"):
        assert redact(dsn) == dsn


@pytest.mark.parametrize(
    ("text", "ms"),
    [
        ("500ms", 500),
        ("5s", 5000),
        ("5", 5000),
        ("0.5", 500),
        ("2m", 120000),
        (" 0 ", 0),
        ("2min", 120000),
        ("1h", 3600000),
        ("1d", 86400000),  # PostgreSQL's units too
    ],
)
def test_parse_duration_ms(text: str, ms: int) -> None:
    assert parse_duration_ms(text) == ms


@pytest.mark.parametrize("text", ["abc", "", "-1", "5w", "ms", "1e3", "5 s s", "5 mins"])
def test_parse_duration_ms_rejects_garbage(text: str) -> None:
    with pytest.raises(UsageError) as err:
        parse_duration_ms(text)
    assert err.value.exit_code == 2


def test_every_command_has_help_with_an_example(capsys: pytest.CaptureFixture[str]) -> None:
    from queueguard.cli.parser import EXAMPLES, build_parser

    parser = build_parser()
    commands = parser._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    assert set(commands) == set(EXAMPLES)
    for name in commands:
        assert main([name, "--help"]) == 0
        out = capsys.readouterr().out
        assert "example:" in out and f"queueguard {name}" in out, name


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.startswith("queueguard 0.4")


def test_colours_only_on_a_tty(monkeypatch: pytest.MonkeyPatch) -> None:
    import io

    from queueguard.style import paint, wants_color

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    assert not wants_color(io.StringIO())
    monkeypatch.delenv("NO_COLOR", raising=False)
    assert wants_color(Tty())
    monkeypatch.setenv("NO_COLOR", "1")
    assert not wants_color(Tty())
    assert paint("x", "red", False) == "x" and paint("x", "red", True) == "\033[31mx\033[0m"
