"""Lint findings as code annotations: one per statement, at the line where it starts (pure:
lint's JSON document in).

GitHub shows at most 10 annotations of a kind per step, so a statement gets one, whatever
it holds: its worst finding decides the level and the title, the others are named in its
message. `lint.github` prints these as workflow commands and `lint.sarif` as SARIF results,
so the two always carry the same files and lines.

Levels. On queueguard's own set every finding fails the gate, so every annotation is an
error. On a set of another format the statement's tier decides: a lock cost (rewrite, build,
scan, fails, breaks, lock) is an error, a rule without one (other, advisory) a warning, and
a note (observed harmless with `--dsn`) a notice.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from itertools import groupby
from typing import Any

from queueguard.lint.sets.rank import RULES as SQUAWK_RULES
from queueguard.lint.sets.rank import Tier

#: the tiers of another format's set that are warnings (the rest above note are errors)
WARNING_TIERS = frozenset({Tier.OTHER.label, Tier.ADVISORY.label})
LEVELS = ("error", "warning", "notice")


@dataclass(frozen=True)
class Annotation:
    """One statement's annotation: `file` relative to the repository root (or absolute when
    outside it), the 1-based line and column where the statement starts."""

    file: str
    line: int
    column: int
    level: str
    code: str
    title: str
    message: str
    #: the codes of its other findings, worst first
    others: tuple[str, ...] = ()


def repository_path(file: str, prefix: str = "", root: str | None = None) -> str:
    """A path of the document (relative to the working directory when under it) relative to
    the repository root: `prefix` is the working directory relative to that root (`""` at
    the root) and `root` its absolute path, for the paths the document keeps absolute."""
    if posixpath.isabs(file):
        if root and (file == root or file.startswith(root.rstrip("/") + "/")):
            return posixpath.relpath(file, root)
        return file
    return posixpath.normpath(posixpath.join(prefix, file))


def _tier(code: str) -> int:
    return int(SQUAWK_RULES.get(code.removeprefix("squawk."), (Tier.OTHER, ""))[0])


def _gate(doc: dict[str, Any], prefix: str, root: str | None) -> list[Annotation]:
    """queueguard's gate: findings grouped by the statement holding them (a finding without
    one, e.g. on manifest.json, is its own)."""

    def where(f: dict[str, Any]) -> tuple[str, int, int]:
        line = f.get("statement_line") or f["line"]
        column = f.get("statement_column") or f["column"]
        return f["file"], line, column

    found: list[Annotation] = []
    findings = sorted(doc["findings"], key=where)
    for (file, line, column), group in groupby(findings, key=where):
        # our own rules first (they name what this project forbids), then squawk's by tier
        ranked = sorted(group, key=lambda f: (f["source"] != "queueguard", -_tier(f["code"])))
        worst, rest = ranked[0], ranked[1:]
        message = f"{worst['message']} (hint: {worst['hint']})"
        if rest:
            also = "; ".join(f"{f['code']}: {f['message']}" for f in rest)
            message += f" Also on this statement: {also}"
        found.append(
            Annotation(
                repository_path(file, prefix, root),
                line,
                column,
                "error",
                worst["code"],
                worst["code"],
                message,
                tuple(f["code"] for f in rest),
            )
        )
    return found


def level_of(tier: str) -> str:
    """The annotation level of a set's statement tier."""
    if tier == Tier.NOTE.label:
        return "notice"
    return "warning" if tier in WARNING_TIERS else "error"


def _set(doc: dict[str, Any], prefix: str, root: str | None) -> list[Annotation]:
    """A set of another format: its flagged statements, each with its chosen finding."""
    others: dict[tuple[str, int], list[str]] = {}
    for f in doc["findings"]:
        if not f["chosen"]:
            others.setdefault((f["revision"], f["statement"]), []).append(f["code"])
    found: list[Annotation] = []
    for s in doc["statements"]:
        rest = others.get((s["revision"], s["index"]), [])
        message = s["cost"]
        guess = s.get("squawk_guess")
        if guess and guess["tier"] != s["tier"]:
            message += f"; squawk's rules guessed {guess['tier']}"
        if rest:
            names = ", ".join(code.removeprefix("squawk.") for code in rest)
            message += f" (+{len(rest)} more on this statement: {names})"
        found.append(
            Annotation(
                repository_path(s["file"], prefix, root),
                s["line"],
                s["column"],
                level_of(s["tier"]),
                s["code"],
                f"{s['tier']} {s['code']}",
                message,
                tuple(rest),
            )
        )
    return found


def of_document(doc: dict[str, Any], prefix: str = "", root: str | None = None) -> list[Annotation]:
    """One annotation per statement with findings, in the document's order."""
    return _set(doc, prefix, root) if "statements" in doc else _gate(doc, prefix, root)
