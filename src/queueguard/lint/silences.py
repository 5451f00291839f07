"""Inline silence markers: a justified, per-file exception to one or more rules.

A marker is a whole-line SQL comment anywhere in the file it applies to:

    -- lint-allow squawk.require-lock-timeout: the runner sets it (SET LOCAL) before step 00

It silences every finding with one of the listed codes in that file, and must say why (at
least `MIN_WORDS` words after the colon). A marker without a justification, a marker for a
rule that cannot be silenced (tamper detection, the read-only proof of audit queries, the
gate's own `lint.*` findings) and squawk's own `-- squawk-ignore` comments (which carry no
justification) are findings themselves; so is a marker that silences nothing, so stale
exceptions do not pile up.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from queueguard.lint.model import Finding, SqlFile

MARKER = "lint-allow"
MIN_WORDS = 3
INVALID = "lint.silence_invalid"
UNUSED = "lint.silence_unused"
_LINE = re.compile(r"^[ \t]*--[ \t]*lint-allow\b(?P<rest>.*)$", re.MULTILINE)
_BODY = re.compile(r"\s+(?P<codes>[\w.\-]+(?:\s*,\s*[\w.\-]+)*)\s*(?::(?P<why>.*))?$")
_SQUAWK_IGNORE = re.compile(r"^[ \t]*--[ \t]*squawk-ignore", re.MULTILINE)
_FORMAT = f"-- {MARKER} <code>[, <code>]: <why this is safe here, at least {MIN_WORDS} words>"


@dataclass(frozen=True)
class Marker:
    """One parsed marker line."""

    file: SqlFile
    offset: int
    codes: tuple[str, ...]
    justification: str


@dataclass(frozen=True)
class Silenced:
    """A finding an inline marker silenced, with the marker's justification."""

    finding: Finding
    justification: str

    def as_json(self, base: Path | None = None) -> dict[str, Any]:
        return {**self.finding.as_json(base), "justification": self.justification}


def markers(file: SqlFile, unsilenceable: Sequence[str]) -> tuple[list[Marker], list[Finding]]:
    """The valid markers of a file, and findings for invalid ones."""
    valid: list[Marker] = []
    problems: list[Finding] = []
    for match in _LINE.finditer(file.text):
        offset = match.start() + match.group(0).index("--")
        body = _BODY.match(match.group("rest"))
        if body is None:
            problems.append(_invalid(file, offset, "a lint-allow marker without a rule code"))
            continue
        codes = tuple(c.strip() for c in body.group("codes").split(","))
        why = (body.group("why") or "").strip()
        blocked = [c for c in codes if _matches(c, unsilenceable)]
        if blocked:
            problems.append(
                _invalid(file, offset, f"{', '.join(blocked)} cannot be silenced by a marker")
            )
        elif len(why.split()) < MIN_WORDS:
            problems.append(
                _invalid(file, offset, f"silencing {', '.join(codes)} without a justification")
            )
        else:
            valid.append(Marker(file, offset, codes, why))
    for match in _SQUAWK_IGNORE.finditer(file.text):
        offset = match.start() + match.group(0).index("--")
        problems.append(_invalid(file, offset, "squawk-ignore comments carry no justification"))
    return valid, problems


def apply(
    findings: Iterable[Finding], files: Iterable[SqlFile], unsilenceable: Sequence[str]
) -> tuple[list[Finding], list[Silenced]]:
    """Split findings into kept and silenced; add findings for bad and unused markers."""
    kept: list[Finding] = []
    silenced: list[Silenced] = []
    by_path: dict[object, list[Marker]] = {}
    used: set[tuple[object, int, str]] = set()
    for file in files:
        valid, problems = markers(file, unsilenceable)
        by_path[file.path] = valid
        kept += problems
    for finding in findings:
        marker = next((m for m in by_path.get(finding.path, ()) if finding.code in m.codes), None)
        if marker is None or _matches(finding.code, unsilenceable):
            kept.append(finding)
        else:
            used.add((marker.file.path, marker.offset, finding.code))
            silenced.append(Silenced(finding, marker.justification))
    for marker_list in by_path.values():
        for marker in marker_list:
            for code in marker.codes:
                if (marker.file.path, marker.offset, code) not in used:
                    kept.append(
                        marker.file.finding(
                            UNUSED,
                            marker.offset,
                            f"lint-allow {code} silences nothing in this file",
                            "remove the marker (or fix the rule code's spelling)",
                        )
                    )
    return kept, silenced


def _matches(code: str, patterns: Sequence[str]) -> bool:
    """Whether a code is one of the patterns (`lint.*` matches every `lint.` code)."""
    return any(code == p or (p.endswith("*") and code.startswith(p[:-1])) for p in patterns)


def _invalid(file: SqlFile, offset: int, message: str) -> Finding:
    return file.finding(INVALID, offset, message, f"write the marker as: {_FORMAT}")
