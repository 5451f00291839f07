"""`lint --output sarif`: SARIF 2.1.0 for code-scanning uploads (pure: lint's JSON document
in, a SARIF log out).

One run, whose driver is queueguard with one rule per code the results use; one result per
statement (the annotations of `lint.annotations`, so a SARIF upload and the workflow
commands of `--output github` name the same files and lines). Locations are relative to the
repository root (`uriBaseId` `%SRCROOT%`, which the uploader resolves to the checkout); a
file outside the repository keeps its absolute `file://` URI.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import PurePosixPath
from typing import Any
from urllib.parse import quote

from queueguard.lint.annotations import Annotation, of_document
from queueguard.lint.rules import RULES
from queueguard.lint.sets.rank import RULES as SQUAWK_RULES

SCHEMA = (
    "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
)
VERSION = "2.1.0"
SRCROOT = "%SRCROOT%"
#: SARIF's name for GitHub's notice
LEVELS = {"error": "error", "warning": "warning", "notice": "note"}
#: the gate's own codes that are not rules of `lint.rules`
GATE_CODES = {
    "lint.syntax": "sqlglot can tokenize the migration file",
    "lint.silence_invalid": "lint-allow markers name a rule, justify it and silence what may be",
    "lint.silence_unused": "every lint-allow marker silences something in its file",
}


def _describe(code: str) -> dict[str, Any]:
    """A rule of the driver: its id, what it checks, where to read more."""
    own = {r.code: r.summary for r in RULES} | GATE_CODES
    rule: dict[str, Any] = {"id": code}
    if code in own:
        rule["shortDescription"] = {"text": own[code]}
    elif code.startswith("squawk."):
        name = code.removeprefix("squawk.")
        tier = SQUAWK_RULES.get(name)
        text = f"squawk's {name} ({tier[0].label})" if tier else f"squawk's {name}"
        rule["shortDescription"] = {"text": text}
        rule["helpUri"] = f"https://squawkhq.com/docs/{name}"
    elif code.startswith("plan."):
        rule["shortDescription"] = {
            "text": f"observed by plan on a copy of the target: {code.removeprefix('plan.')}"
        }
    else:
        rule["shortDescription"] = {"text": code}
    return rule


def _location(a: Annotation) -> dict[str, Any]:
    artifact: dict[str, Any]
    if PurePosixPath(a.file).is_absolute():
        artifact = {"uri": "file://" + quote(a.file)}
    else:
        artifact = {"uri": quote(a.file), "uriBaseId": SRCROOT}
    region = {"startLine": a.line, "startColumn": a.column}
    return {"physicalLocation": {"artifactLocation": artifact, "region": region}}


def render(
    docs: Sequence[dict[str, Any]], version: str, prefix: str = "", root: str | None = None
) -> dict[str, Any]:
    """The SARIF log of one lint run's documents (several when its paths belong to several
    sets), one run holding every result; `version` is queueguard's (the driver's)."""
    found = [a for doc in docs for a in of_document(doc, prefix, root)]
    codes = list(dict.fromkeys(a.code for a in found))
    results = [
        {
            "ruleId": a.code,
            "ruleIndex": codes.index(a.code),
            "level": LEVELS[a.level],
            "message": {"text": f"{a.title}: {a.message}"},
            "locations": [_location(a)],
        }
        for a in found
    ]
    driver = {
        "name": "queueguard",
        "version": version,
        "rules": [_describe(code) for code in codes],
    }
    return {
        "$schema": SCHEMA,
        "version": VERSION,
        "runs": [{"tool": {"driver": driver}, "results": results}],
    }
