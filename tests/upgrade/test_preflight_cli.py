"""`queueguard preflight` on the command line, and the audit files themselves."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from queueguard import revisions
from queueguard.cli import main
from queueguard.errors import ConnectionFailed, UsageError
from queueguard.pg.dsn import with_params
from queueguard.queue_schema import audit
from queueguard.queue_schema.preflight import preflight

from .preflight_support import (
    PINNED_QUEUE,
    execute,
)

ROOT = Path(__file__).resolve().parents[2]


# command line ----------------------------------------------------------------------------------
def test_cli_json_shape(v03_db: str, capsys: pytest.CaptureFixture[str]) -> None:
    execute(v03_db, f"UPDATE tasks SET data = '1' WHERE physical_queue = '{PINNED_QUEUE}'")
    code = main(["preflight", "--dsn", v03_db, "--json", "--samples", "2"])
    captured = capsys.readouterr()
    doc = json.loads(captured.out)
    assert code == 1
    assert set(doc) == {"schemaVersion", "ok", "revision", "target", "findings", "elapsed_ms"}
    assert doc["schemaVersion"] == 1 and doc["ok"] is False
    assert (doc["revision"], doc["target"]) == ("003", "004")
    for finding in doc["findings"]:
        assert set(finding) == {"code", "severity", "object", "count", "samples", "message"}
        assert finding["severity"] in ("blocking", "warning", "info")
        assert re.fullmatch(r"[a-z]+\.[a-z_]+", finding["code"])
    assert "target: " in captured.err  # the redacted target is printed first


@pytest.mark.parametrize(
    "args",
    [
        ["--target", "005"],
        ["--samples", "-1"],
        ["--lock-timeout", "0"],
        ["--statement-timeout", "soon"],
        ["--fail-on", "info"],
    ],
)
def test_usage_errors_exit_2(v03_db: str, args: list[str]) -> None:
    assert main(["preflight", "--dsn", v03_db, *args]) == 2


def test_explicit_target_is_required(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("QUEUEGUARD_DSN", raising=False)
    assert main(["preflight"]) == 2


def test_unreachable_server_exits_2(v03_db: str, tmp_path: Path) -> None:
    dead = with_params(v03_db, host=str(tmp_path), port="1", connect_timeout="2")
    with pytest.raises(ConnectionFailed):
        preflight(dead)
    assert main(["preflight", "--dsn", dead]) == 2
    with pytest.raises(UsageError):
        preflight(v03_db, target="latest")


# the files themselves --------------------------------------------------------------------------
def _codes_in_headers() -> set[str]:
    codes = set()
    for query in audit.audit_queries():
        check = query.sql.split("-- applies-to:")[0]
        codes |= set(re.findall(r"\b([a-z]+\.[a-z_]+) \((?:blocking|warning|info)\)", check))
    return codes


PREFLIGHT_CODES = {
    "schema.empty",
    "schema.unversioned",
    "schema.revision_unknown",
    "schema.at_head",
    "schema.at_target",
    "schema.pending",
    "runtime.standby",
    "runtime.pooled",
    "locks.lock_timeout",
    "locks.statement_timeout",
    "preflight.query_failed",
    "preflight.checks_skipped",
}


def test_every_code_is_documented_and_has_a_message() -> None:
    docs = (ROOT / "docs" / "preflight.md").read_text(encoding="utf-8")
    codes = _codes_in_headers() | PREFLIGHT_CODES
    assert len(codes) > 30
    missing_docs = sorted(c for c in codes if f"`{c}`" not in docs)
    assert missing_docs == []
    generated = PREFLIGHT_CODES - {"preflight.query_failed", "preflight.checks_skipped"}
    generated -= {"locks.lock_timeout", "locks.statement_timeout"}
    assert sorted(c for c in _codes_in_headers() | generated if c not in audit.MESSAGES) == []


def test_every_audit_file_has_the_header_and_one_statement() -> None:
    import sqlglot

    for query in audit.audit_queries():
        for field in ("-- check:", "-- applies-to:", "-- What:", "-- Cost:", "-- Locks:"):
            assert field in query.sql, (query.name, field)
        assert query.applies_to and set(query.applies_to) <= set(revisions.packaged().ids)
        statements = [s for s in sqlglot.parse(query.sql, read="postgres") if s is not None]
        assert len(statements) == 1, query.name


def test_guard_gets_the_blocking_files_schema_first() -> None:
    guard = audit.for_revision("003")
    assert [q.name for q in guard] == [
        "003_schema_contract.sql",
        "003_queue_keys.sql",
        "003_task_rows.sql",
    ]
    everything = [q.kind for q in audit.for_revision("003", include_advisory=True)]
    assert everything == sorted(everything, key=audit.KIND_ORDER.index)
    assert {"locks", "runtime", "estimate"} <= set(everything)
    assert all(not q.advisory for q in guard)
