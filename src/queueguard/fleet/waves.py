"""Targets into waves (pure): in the file's order, a target joins the first wave whose
`match` its labels satisfy (every label equal; no match: every target left)."""

from __future__ import annotations

from collections.abc import Sequence

from queueguard.errors import FleetFileError
from queueguard.fleet.targets import Target, Wave, unique


def assign(targets: Sequence[Target], waves: Sequence[Wave]) -> list[list[Target]]:
    """The targets of each wave, in order; refused (exit 2, before any claim): two targets
    of one name, a wave that selects no target, a target that joins no wave."""
    unique([t.name for t in targets], "targets")
    members: list[list[Target]] = [[] for _ in waves]
    for target in targets:
        for i, wave in enumerate(waves):
            if all(target.labels.get(k) == v for k, v in wave.match.items()):
                members[i].append(target)
                break
        else:
            raise FleetFileError(
                f"target {target.name!r} joins no wave (labels {target.labels or '{}'}): "
                "add a last wave with no match"
            )
    for i, (wave, found) in enumerate(zip(waves, members, strict=True)):
        if not found:
            raise FleetFileError(f"waves[{i}].match: wave {wave.name!r} selects no target")
    return members
