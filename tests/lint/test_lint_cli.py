"""`queueguard lint` as CI runs it: the repository is clean, tampering is caught, exit codes,
the human format and the JSON shape, and squawk pinned and installed."""

from __future__ import annotations

import json
import re
import shutil
import sys
import tomllib
from pathlib import Path

import pytest

from queueguard.cli import main
from queueguard.lint import lint, squawk
from queueguard.resources import migrations_dir

ROOT = Path(__file__).resolve().parents[2]
BAD = Path(__file__).parent / "lint_corpus" / "golden" / "lock_order" / "bad.sql"
HUMAN = re.compile(r"^[^\s:]+:\d+:\d+: [a-z]+\.[a-z_\-]+ .+ \(hint: .+\)$")
FINDING_KEYS = {"code", "file", "line", "column", "message", "hint", "source"}


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["lint", *argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def migrations_copy(tmp_path: Path) -> Path:
    root = tmp_path / "migrations"
    shutil.copytree(migrations_dir(), root, ignore=shutil.ignore_patterns("__pycache__"))
    return root


# the repository -------------------------------------------------------------------------------
def test_the_repository_lints_clean(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(capsys)
    assert (code, out) == (0, ""), out
    assert "clean" in err


def test_the_clean_repository_as_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "--json")
    doc = json.loads(out)
    assert code == 0
    assert set(doc) == {"schemaVersion", "ok", "findings", "silenced", "files", "squawk"}
    assert (doc["schemaVersion"], doc["ok"], doc["findings"]) == (1, True, [])
    assert doc["squawk"] == squawk.SQUAWK_VERSION
    # Every silence in 004 is a timeout the runner sets, and says so.
    assert doc["silenced"], "004's markers silence squawk's timeout rules"
    for item in doc["silenced"]:
        assert set(item) == FINDING_KEYS | {"justification"}
        assert item["file"].startswith("migrations/sql/004/")
        assert item["code"] in ("squawk.require-lock-timeout", "squawk.require-statement-timeout")
        assert "steps.apply" in item["justification"]


# tamper detection ------------------------------------------------------------------------------
def test_an_edited_copy_of_a_released_migration_is_caught(
    capsys: pytest.CaptureFixture[str], migrations_copy: Path
) -> None:
    step = migrations_copy / "sql" / "003" / "01_build_and_swap.sql"
    step.write_text(step.read_text().replace("row_number()", "dense_rank()"))
    assert lint([migrations_copy]).ok is False
    code, out, _ = _run(capsys, str(migrations_copy))
    assert code == 1
    (line,) = out.splitlines()
    assert line.startswith(f"{step}:1:1: migration.tampered released revision 003 was edited: ")
    assert "sql/003/01_build_and_swap.sql (edited)" in line


def test_a_comment_added_to_004_is_tampering_too(migrations_copy: Path) -> None:
    step = migrations_copy / "sql" / "004" / "05_fence.sql"
    step.write_text(step.read_text() + "-- harmless?\n")
    report = lint([migrations_copy])
    assert [(f.code, f.path, f.line) for f in report.findings] == [
        ("migration.tampered", step.resolve(), 1)
    ]


def test_a_removed_released_revision_is_reported_at_the_manifest(migrations_copy: Path) -> None:
    shutil.rmtree(migrations_copy / "sql" / "002")
    report = lint([migrations_copy])
    assert {(f.code, f.path.name) for f in report.findings} == {
        ("migration.tampered", "manifest.json")
    }
    assert any("released revision 002 was removed" in f.message for f in report.findings)


# exit codes and formats ------------------------------------------------------------------------
def test_findings_exit_1_in_the_documented_format(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(capsys, str(BAD))
    assert code == 1
    lines = out.splitlines()
    assert len(lines) == 2 and all(HUMAN.match(line) for line in lines), lines
    assert "2 finding(s)" in err


def test_findings_as_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "--json", str(BAD))
    doc = json.loads(out)
    assert (code, doc["schemaVersion"], doc["ok"]) == (1, 1, False)
    statement = {"statement_line", "statement_column"}
    assert [set(f) for f in doc["findings"]] == [FINDING_KEYS | statement] * 2
    first = doc["findings"][0]
    assert (first["code"], first["line"], first["column"], first["source"]) == (
        "migration.lock_order",
        6,
        12,
        "queueguard",
    )
    assert first["hint"]
    # the statement holding it starts at the line's first token (what an annotation points at)
    assert (first["statement_line"], first["statement_column"]) == (6, 1)


def test_a_missing_path_exits_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out, err = _run(capsys, str(tmp_path / "missing"))
    assert (code, out) == (2, "")
    assert "no such file or directory" in err


def test_without_squawk_the_gate_refuses_with_exit_2(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(squawk.ENV_BINARY, str(tmp_path / "no-squawk"))
    code, _, err = _run(capsys, str(BAD))
    assert code == 2
    assert "QUEUEGUARD_SQUAWK" in err
    # Audit queries alone do not need squawk.
    assert _run(capsys, str(ROOT / "audit_queries"))[0] == 0


def test_another_squawk_version_is_refused(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    fake = tmp_path / "squawk"
    fake.write_text(f"#!{sys.executable}\nprint('squawk 1.0.0')\n")
    fake.chmod(0o755)
    monkeypatch.setenv(squawk.ENV_BINARY, str(fake))
    code, _, err = _run(capsys, str(BAD))
    assert code == 2
    assert f"pinned to {squawk.SQUAWK_VERSION}" in err


# squawk: pinned, installed, not a runtime dependency ----------------------------------------------
def test_squawk_is_pinned_in_the_extras_and_not_a_runtime_dependency() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    pin = f"squawk-cli=={squawk.SQUAWK_VERSION}"
    assert pin in project["optional-dependencies"]["test"]
    assert project["optional-dependencies"]["lint"] == [pin]
    assert not any(d.startswith("squawk") for d in project["dependencies"])


def test_the_installed_squawk_is_the_pinned_one() -> None:
    assert squawk.checked_version(squawk.locate()) == squawk.SQUAWK_VERSION
