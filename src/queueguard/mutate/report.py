"""The outcome of a mutation run: score, survivors, timeouts, equivalents; text and JSON.

A mutant is *killed* when a gate fails on it, *timeout* when it overran the per-mutant timeout
(counted as killed, listed apart), *equivalent* when the reviewed file lists it and no gate
failed, and *survived* otherwise. The score is (killed + timeouts) / non-equivalent mutants; a
survivor makes the run fail (exit 1).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any, Literal

from queueguard.mutate.equivalents import Equivalent, Matched, stub
from queueguard.mutate.model import Mutant
from queueguard.mutate.operators import OPERATORS
from queueguard.mutate.runner import RunResult
from queueguard.mutate.worker import Outcome

Status = Literal["killed", "timeout", "survived", "equivalent"]
STATUSES: tuple[Status, ...] = ("killed", "timeout", "survived", "equivalent")


@dataclass(frozen=True)
class Result:
    mutant: Mutant
    outcome: Outcome
    equivalent: Equivalent | None

    @property
    def status(self) -> Status:
        if self.outcome.timed_out:
            return "timeout"
        if self.outcome.killed_by is not None:
            return "killed"
        return "equivalent" if self.equivalent is not None else "survived"

    @property
    def reason(self) -> str:
        """Why it was killed (the first failing gate's summary), or the equivalence reason."""
        if self.outcome.timed_out:
            return f"timed out after {self.outcome.elapsed_ms / 1000:.0f} s"
        failed = next((g for g in self.outcome.gates if not g.ok), None)
        if failed is not None:
            return f"{failed.name}: {failed.summary}"
        return self.equivalent.reason if self.equivalent else ""

    def as_json(self, *, detail: bool = False) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "id": self.mutant.id,
            "operator": self.mutant.operator,
            "file": self.mutant.file,
            "line": self.mutant.line,
            "statement": self.mutant.statement,
            "description": self.mutant.description,
            "status": self.status,
            "killedBy": self.outcome.killed_by,
            "reason": self.reason,
            "elapsedMs": self.outcome.elapsed_ms,
        }
        if detail:
            doc["diff"] = self.mutant.diff()
            doc["gates"] = [g.as_json() for g in self.outcome.gates]
        return doc


@dataclass(frozen=True)
class Report:
    revision: str
    results: tuple[Result, ...]
    run: RunResult
    stale: tuple[Equivalent, ...]
    gates: tuple[str, ...]
    equivalents_file: str

    def of(self, status: Status) -> list[Result]:
        return [r for r in self.results if r.status == status]

    @property
    def counts(self) -> dict[str, int]:
        found = Counter(r.status for r in self.results)
        return {"mutants": len(self.results), **{s: found.get(s, 0) for s in STATUSES}}

    @property
    def non_equivalent(self) -> int:
        return len(self.results) - self.counts["equivalent"]

    @property
    def score(self) -> float | None:
        if not self.non_equivalent:
            return None
        return (self.counts["killed"] + self.counts["timeout"]) / self.non_equivalent

    @property
    def ok(self) -> bool:
        return not self.of("survived")

    @property
    def exit_code(self) -> int:
        return 0 if self.ok else 1

    @property
    def mutants_per_second(self) -> float:
        seconds = self.run.elapsed_ms / 1000
        return len(self.results) / seconds if seconds > 0 else 0.0

    @property
    def contradicted(self) -> list[Result]:
        """Listed as equivalent, yet a gate killed it: the entry's reason is wrong."""
        return [r for r in self.results if r.equivalent is not None and r.status != "equivalent"]

    def by_operator(self) -> dict[str, dict[str, int]]:
        """Counts by status per operator, in the operators' stable order."""
        order = [op.name for op in OPERATORS]
        table: dict[str, dict[str, int]] = {}
        for r in sorted(self.results, key=lambda r: order.index(r.mutant.operator)):
            row = table.setdefault(r.mutant.operator, {"mutants": 0, **dict.fromkeys(STATUSES, 0)})
            row["mutants"] += 1
            row[r.status] += 1
        return table

    def as_json(self) -> dict[str, Any]:
        contradicted = {r.mutant.id for r in self.contradicted}
        return {
            "schemaVersion": 1,
            "revision": self.revision,
            "ok": self.ok,
            "score": None if self.score is None else round(self.score, 4),
            "counts": {**self.counts, "nonEquivalent": self.non_equivalent},
            "gates": list(self.gates),
            "jobs": self.run.jobs,
            "elapsedMs": self.run.elapsed_ms,
            "totalMs": self.run.total_ms,
            "mutantsPerSecond": round(self.mutants_per_second, 4),
            "operators": self.by_operator(),
            "survivors": [r.as_json(detail=True) for r in self.of("survived")],
            "timeouts": [r.as_json(detail=True) for r in self.of("timeout")],
            "equivalents": {
                "file": self.equivalents_file,
                "matched": [
                    {**r.as_json(), "reason": r.equivalent.reason}
                    for r in self.results
                    if r.equivalent is not None
                ],
                "contradicted": [r.mutant.id for r in self.contradicted],
                "stale": [e.as_json() for e in self.stale],
            },
            "baselines": {
                o.key: o.as_json() | {"ok": not o.timed_out and o.killed_by is None}
                for o in self.run.baselines
            },
            # a listed equivalent that a gate killed carries its evidence (the gates' output):
            # either its reason is wrong or the gate's verdict is, and only that tells which
            "mutants": [r.as_json(detail=r.mutant.id in contradicted) for r in self.results],
        }

    def render(self) -> str:
        c = self.counts
        score = "n/a" if self.score is None else f"{self.score:.3f}"
        lines = [
            f"queueguard mutate {self.revision}: {c['mutants']} mutants — {c['killed']} killed, "
            f"{c['timeout']} timed out, {c['survived']} survived, {c['equivalent']} equivalent",
            f"score {score} ({c['killed'] + c['timeout']}/{self.non_equivalent} non-equivalent "
            f"mutants killed) by {', '.join(self.gates)}",
            f"{self.run.elapsed_ms / 1000:.0f} s for the mutants ({self.mutants_per_second:.3f} "
            f"mutants/s, {self.run.jobs} job(s)); {self.run.total_ms / 1000:.0f} s in all",
            "",
            f"{'operator':18} {'mutants':>7} {'killed':>7} {'timeout':>7} {'survived':>8} "
            f"{'equiv.':>6}",
        ]
        for name, row in self.by_operator().items():
            lines.append(
                f"{name:18} {row['mutants']:7} {row['killed']:7} {row['timeout']:7} "
                f"{row['survived']:8} {row['equivalent']:6}"
            )
        for r in self.of("survived"):
            lines += ["", f"SURVIVED {r.mutant.id} {r.mutant.operator} {r.mutant.where}"]
            lines += [f"  {r.mutant.description}", "", _indent(r.mutant.diff()), ""]
            lines += [f"  {g.name}: {g.summary}" for g in r.outcome.gates]
            lines += [
                "",
                f"  if no database state can tell it from the original, add to "
                f"{self.equivalents_file}:",
                _indent(stub(r.mutant), 4),
            ]
        if self.of("timeout"):
            lines += ["", "TIMED OUT (counted as killed):"]
            lines += [
                f"  {r.mutant.id} {r.mutant.operator} {r.mutant.where} {r.reason}"
                for r in self.of("timeout")
            ]
        if self.contradicted:
            lines += ["", "LISTED AS EQUIVALENT BUT KILLED (the reason is wrong; remove them):"]
            lines += [f"  {r.mutant.id} {r.reason}" for r in self.contradicted]
        if self.stale:
            lines += ["", f"STALE entries in {self.equivalents_file} (no such mutant any more):"]
            lines += [f"  {e.id} {e.operator} {e.file}: {e.change or e.reason}" for e in self.stale]
        verdict = (
            "every non-equivalent mutant was killed"
            if self.ok
            else f"{c['survived']} mutant(s) survived: the gates cannot tell them from "
            f"{self.revision}"
        )
        lines += ["", verdict]
        return "\n".join(lines)


def _indent(text: str, width: int = 2) -> str:
    return "\n".join((" " * width + line) if line else line for line in text.splitlines())


def build(
    revision: str,
    mutants: list[Mutant],
    run: RunResult,
    matched: Matched,
    gates: tuple[str, ...],
    equivalents_file: str,
) -> Report:
    results = tuple(
        Result(m, o, matched.equivalent.get(m.id))
        for m, o in zip(mutants, run.outcomes, strict=True)
    )
    return Report(revision, results, run, matched.stale, gates, equivalents_file)
