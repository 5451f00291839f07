"""A targets file resolved: its set, its targets (listed and discovered) and the waves
they are in — everything checked that can be checked before anything is claimed."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from queueguard import sets
from queueguard.errors import FleetFileError, UsageError
from queueguard.fleet import apply, discover, waves
from queueguard.fleet.targets import FleetFile, Target, load
from queueguard.resources import migrations_dir
from queueguard.sets import MigrationSet


@dataclass
class Fleet:
    """A targets file resolved: its set, its targets and the waves they are in."""

    file: FleetFile
    mset: MigrationSet
    targets: list[Target]
    members: list[list[Target]]


def resolve(path: Path, migrations: str | None, fmt: str | None, parallel: int = 4) -> Fleet:
    """Everything checked that can be checked before a claim (exit 2 on a refusal)."""
    if parallel < 1:
        raise UsageError(f"--parallel takes a number of at least 1, got {parallel}")
    fleet_file = load(path, parallel)
    folder = Path(migrations).resolve() if migrations else fleet_file.migrations
    chosen = fmt or fleet_file.format
    mset = (
        sets.load(folder, chosen) if folder else sets.load(migrations_dir(), chosen or "queueguard")
    )
    found = discover.resolve(fleet_file)
    members = waves.assign(found, fleet_file.waves)
    for t in found:
        refused = apply.refusal(mset, t)
        if refused:
            raise FleetFileError(refused)
    return Fleet(fleet_file, mset, found, members)


def refuse_online(fleet: Fleet) -> None:
    """What `--online` cannot do, refused before anything is claimed (exit 2)."""
    if fleet.mset.format == "queueguard":
        raise UsageError(
            "fleet upgrade --online applies sets of other formats; queueguard's own online "
            "path runs in phases while hosts run: queueguard upgrade --online per database"
        )
    schemas = [t.name for t in fleet.targets if t.schema is not None]
    if schemas:
        raise UsageError(
            f"fleet upgrade --online needs database targets (the rebuild's working schema is "
            f"one per database); schema targets: {', '.join(schemas[:5])}"
        )
