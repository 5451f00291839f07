"""`queueguard mutate [REVISION]`: plan the mutants (`--list`), then judge them (`execute`)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from queueguard.errors import UsageError
from queueguard.mutate import equivalents, report, runner
from queueguard.mutate.generate import generate
from queueguard.mutate.model import Mutant
from queueguard.mutate.operators import OPERATORS, select
from queueguard.mutate.sites import is_online
from queueguard.mutate.worker import Outcome
from queueguard.revisions import SetFacts


@dataclass(frozen=True)
class Plan:
    migrations: SetFacts
    revision: str
    #: every mutant of the revision (what the equivalence file is matched against)
    generated: tuple[Mutant, ...]
    #: the mutants to judge (`--operator` / `--mutant` select among `generated`)
    selected: tuple[Mutant, ...]
    matched: equivalents.Matched
    equivalents_path: Path

    def as_json(self) -> dict[str, Any]:
        return {
            "schemaVersion": 1,
            "revision": self.revision,
            "count": len(self.selected),
            "operators": dict(Counter(m.operator for m in self.selected)),
            "equivalents": str(self.equivalents_path),
            "stale": [e.as_json() for e in self.matched.stale],
            "mutants": [
                {**m.as_json(), "equivalent": m.id in self.matched.equivalent}
                for m in self.selected
            ],
        }

    def render(self) -> str:
        lines = [
            f"{m.id}  {m.operator:16} {m.where:32} {m.description}"
            + ("  [equivalent]" if m.id in self.matched.equivalent else "")
            for m in self.selected
        ]
        counts = Counter(m.operator for m in self.selected)
        per = ", ".join(f"{op.name} {counts[op.name]}" for op in OPERATORS if counts[op.name])
        lines += ["", f"{len(self.selected)} mutants of {self.revision} ({per})"]
        lines += [
            f"stale equivalence entry {e.id} ({e.operator} {e.file})" for e in self.matched.stale
        ]
        return "\n".join(lines)


#: which of a revision's files are mutated
SCOPES = ("all", "steps", "online")


def resolve_revision(migrations: SetFacts, revision: str | None) -> str:
    if revision in (None, "head"):
        return migrations.head.id
    assert revision is not None
    return migrations.get(revision).id


def plan(
    migrations: SetFacts,
    revision: str | None = None,
    *,
    operators: Sequence[str] | None = None,
    only: Sequence[str] | None = None,
    equivalents_path: Path | None = None,
    scope: str = "steps",
) -> Plan:
    """The mutants of `revision` (default: head), matched with the equivalence file.
    `scope`: `steps` (the revision's step files), `online` (its online path) or `all`."""
    if scope not in SCOPES:
        raise UsageError(f"--scope takes one of {', '.join(SCOPES)}, got {scope!r}")
    chosen = select(list(operators) if operators else None)
    target = resolve_revision(migrations, revision)
    path = equivalents_path or equivalents.default_path(migrations.root)
    entries = equivalents.load(path)
    generated = tuple(generate(migrations, target))
    selected = tuple(
        m
        for m in generated
        if m.operator in {op.name for op in chosen}
        and scope in ("all", "online" if is_online(m.file) else "steps")
    )
    if only:
        known = {m.id for m in generated}
        unknown = sorted(set(only) - known)
        if unknown:
            raise UsageError(f"no mutant {', '.join(unknown)} of {target} (see --list)")
        selected = tuple(m for m in selected if m.id in set(only))
    return Plan(
        migrations,
        target,
        generated,
        selected,
        equivalents.match(entries, generated, target),
        path,
    )


def execute(
    the_plan: Plan,
    settings: runner.Settings,
    progress: Callable[[int, Mutant, Outcome], None] | None = None,
    baseline_progress: Callable[[str], None] | None = None,
) -> report.Report:
    """Judge the selected mutants with the gates."""
    if settings.jobs < 1:
        raise UsageError(f"--jobs takes a number >= 1, got {settings.jobs}")
    if settings.timeout_s <= 0:
        raise UsageError("--timeout must be positive")
    mutants = list(the_plan.selected)
    result = runner.run(
        the_plan.migrations, the_plan.revision, mutants, settings, progress, baseline_progress
    )
    gates = ("lint", "verify", "command") if settings.command else ("lint", "verify")
    return report.build(
        the_plan.revision, mutants, result, the_plan.matched, gates, str(the_plan.equivalents_path)
    )
