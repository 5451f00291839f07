"""`queueguard verify`'s report: one check, a fixture's checks, the run's report (with the
static compatibility matrix); the readable diffs a failed check shows, and the table `render`
prints."""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass, field
from typing import Any

from queueguard import snapshot
from queueguard.queue_schema import compat
from queueguard.style import paint


@dataclass
class Check:
    name: str
    ok: bool
    detail: str = ""


@dataclass
class FixtureResult:
    fixture: str
    revision: str
    checks: list[Check] = field(default_factory=list)
    elapsed_ms: int = 0

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)

    def as_json(self) -> dict[str, Any]:
        return {
            "fixture": self.fixture,
            "revision": self.revision,
            "ok": self.ok,
            "elapsed_ms": self.elapsed_ms,
            "checks": [c.__dict__ for c in self.checks],
        }


@dataclass
class VerifyReport:
    results: list[FixtureResult]
    elapsed_ms: int
    compatibility: compat.Matrix | None = None

    @property
    def ok(self) -> bool:
        matrix_ok = self.compatibility is None or not self.compatibility.violations()
        return matrix_ok and all(r.ok for r in self.results)

    def as_json(self) -> dict[str, Any]:
        return {
            "schemaVersion": 1,
            "ok": self.ok,
            "elapsed_ms": self.elapsed_ms,
            "fixtures": [r.as_json() for r in self.results],
            "compatibility": self.compatibility.as_json() if self.compatibility else None,
        }


def state_diff(expected: dict[str, Any], actual: dict[str, Any], limit: int = 60) -> str:
    """A readable unified diff of two normalised state documents."""
    return json_diff(snapshot.normalise(expected), snapshot.normalise(actual), limit=limit)


def json_diff(
    expected: Any, actual: Any, labels: tuple[str, str] = ("golden", "upgraded"), limit: int = 60
) -> str:
    """A readable unified diff of two JSON documents."""

    def lines(doc: Any) -> list[str]:
        return json.dumps(doc, indent=1, ensure_ascii=False, sort_keys=True).splitlines()

    diff = list(difflib.unified_diff(lines(expected), lines(actual), *labels, lineterm="", n=2))
    more = f"\n… {len(diff) - limit} more diff lines" if len(diff) > limit else ""
    return "\n".join(diff[:limit]) + more


def render(report: VerifyReport, color: bool = False) -> str:
    names: list[str] = []  # every check any fixture ran, in order (refusals: v0.3 only)
    for r in report.results:
        names += [c.name for c in r.checks if c.name not in names]
    header = f"{'fixture':8} {'rev':4} " + " ".join(f"{n:10}" for n in names) + "   ms"
    lines = [header, "-" * len(header)]
    for r in report.results:
        ran = {c.name: c.ok for c in r.checks}
        cells = " ".join(
            f"{'-':10}"
            if n not in ran
            else paint(f"{'ok':10}", "green", color)
            if ran[n]
            else paint(f"{'FAIL':10}", "red", color)
            for n in names
        )
        lines.append(f"{r.fixture:8} {r.revision:4} {cells} {r.elapsed_ms:5}")
    for r in report.results:
        for c in r.checks:
            if not c.ok:
                lines.append(f"\n{r.fixture} {c.name} failed:\n{c.detail}")
    fences = [
        f"  {r.fixture}: {c.detail}"
        for r in report.results
        for c in r.checks
        if c.name == "fence" and c.ok
    ]
    if fences:
        lines.append(
            "\nprotocol fence (legacy workers around a forced upgrade):\n" + "\n".join(fences)
        )
    if report.compatibility is not None:
        lines.append("\n" + report.compatibility.render())
    verdict = (
        paint("all fixtures upgrade to the golden state", "green", color)
        if report.ok
        else paint("VERIFY FAILED", "red", color)
    )
    lines.append(f"\n{verdict} ({report.elapsed_ms} ms)")
    return "\n".join(lines)
