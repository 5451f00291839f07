"""The report of `lint` on a migration set of another format: one entry per flagged statement
(pure).

The text names each statement once (`file:line`), with the finding that matters, what it
costs in lock-mode terms and how many more findings the statement has; `--json` keeps every
squawk finding, each marked with its statement and whether it is that statement's chosen one.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from queueguard.lint.model import Finding
from queueguard.lint.sets.rank import Tier, rule_of, tier_of


@dataclass(frozen=True)
class Flagged:
    """One statement with findings (or, with `--dsn`, a cost squawk did not see)."""

    revision: str
    #: its index among the revision's statements (as `plan` numbers them)
    index: int
    path: Path
    line: int
    #: where the statement begins on its line (shown only when it is not the first)
    column: int
    sql: str
    #: every squawk finding on the statement, in file order
    findings: tuple[Finding, ...]
    #: the one that matters; None when only `plan`'s trace flagged the statement
    chosen: Finding | None
    tier: Tier
    cost: str
    #: squawk's guess (its chosen rule's tier and cost) when the observation replaced it
    guess: tuple[Tier, str] | None = None
    #: `plan`'s bill line for the statement (bill.document), with `--dsn`
    observation: dict[str, Any] | None = None

    @property
    def code(self) -> str:
        return self.chosen.code if self.chosen else f"plan.{self.tier.label}"

    @property
    def suppressed(self) -> list[Finding]:
        return [f for f in self.findings if f is not self.chosen]

    @property
    def severity(self) -> str:
        return "note" if self.tier is Tier.NOTE else "finding"

    def display_path(self, base: Path) -> str:
        try:
            return str(self.path.relative_to(base.resolve()))
        except ValueError:
            return str(self.path)

    def where(self, base: Path) -> str:
        """`file:line`, and `:column` when the statement is not the first on its line."""
        column = f":{self.column}" if self.column > 1 else ""
        return f"{self.display_path(base)}:{self.line}{column}"

    def render(self, base: Path) -> str:
        more = ""
        if self.suppressed:
            counts = Counter(rule_of(f) for f in self.suppressed)
            names = ", ".join(f"{r} ×{n}" if n > 1 else r for r, n in counts.items())
            more = f" (+{len(self.suppressed)} more on this statement: {names})"
        guess = ""
        if self.guess and self.guess[0] is not self.tier:
            guess = f"; squawk's rules guessed {self.guess[0].label}"
        return f"{self.where(base)}: {self.tier.label} {self.code}: {self.cost}{guess}{more}"

    def as_json(self, base: Path) -> dict[str, Any]:
        return {
            "revision": self.revision,
            "index": self.index,
            "file": self.display_path(base),
            "line": self.line,
            "column": self.column,
            "sql": self.sql,
            "code": self.code,
            "tier": self.tier.label,
            "severity": self.severity,
            "cost": self.cost,
            "squawk_guess": (
                {"tier": self.guess[0].label, "cost": self.guess[1]} if self.guess else None
            ),
            "suppressed": len(self.suppressed),
            "observed": self.observation,
        }


@dataclass(frozen=True)
class SetLintReport:
    format: str
    root: Path
    flagged: tuple[Flagged, ...]
    files: int
    squawk_version: str | None
    #: Python revisions (Alembic): their statements are known only by running them
    python_revisions: tuple[str, ...] = ()
    #: with `--dsn`: the target's revision and the revisions `plan` traced
    target_at: str | None = None
    traced: tuple[str, ...] | None = None
    base: Path = field(default_factory=Path.cwd)

    @property
    def findings(self) -> list[Finding]:
        return [f for s in self.flagged for f in s.findings]

    @property
    def ok(self) -> bool:
        return all(s.tier is Tier.NOTE for s in self.flagged)

    @property
    def exit_code(self) -> int:
        return 0 if self.ok else 1

    def render_text(self) -> str:
        return "\n".join(s.render(self.base) for s in self.flagged)

    def summary(self) -> str:
        counts = Counter(s.tier for s in self.flagged if s.tier is not Tier.NOTE)
        tiers = ", ".join(f"{counts[t]} {t.label}" for t in sorted(counts, reverse=True))
        notes = sum(1 for s in self.flagged if s.tier is Tier.NOTE)
        flagged = len(self.flagged) - notes
        parts = [
            f"queueguard lint ({self.format} set {self.root.name}): "
            + (f"{flagged} statement(s) flagged ({tiers})" if flagged else "clean")
            + f" in {self.files} file(s); {len(self.findings)} squawk finding(s) in all, "
            f"one shown per statement (--json has every one)"
        ]
        if notes:
            parts.append(f"{notes} note(s): flagged by squawk, harmless as observed")
        if self.traced is not None:
            at = self.target_at or "no recorded revision"
            parts.append(
                f"observed on a copy of the target (at {at}): {len(self.traced)} pending "
                "revision(s) traced; the others stay static"
            )
        if self.python_revisions:
            parts.append(
                f"{len(self.python_revisions)} Python revision(s) not linted: they cannot be "
                "rendered as SQL offline"
            )
        return "; ".join(parts)

    def as_json(self) -> dict[str, Any]:
        findings = []
        for s in self.flagged:
            for f in s.findings:
                findings.append(
                    {
                        **f.as_json(self.base),
                        "revision": s.revision,
                        "statement": s.index,
                        "tier": tier_of(f).label,
                        "chosen": f is s.chosen,
                    }
                )
        return {
            "ok": self.ok,
            "format": self.format,
            "root": str(self.root),
            "files": self.files,
            "squawk": self.squawk_version,
            "observed": self.traced is not None,
            "target_at": self.target_at,
            "traced": list(self.traced) if self.traced is not None else None,
            "python_revisions": list(self.python_revisions),
            "statements": [s.as_json(self.base) for s in self.flagged],
            "findings": findings,
        }
