"""A target's state as the fleet's documents say it (pure): a revision (an Alembic state of
several heads as their ids joined by `,`); a Django database's applied set as each app's
latest applied migration — `revision` null and `latestApplied`, as `status`, `plan` and
`upgrade` say it for one database."""

from __future__ import annotations

from typing import Any

from queueguard.sets import MigrationSet
from queueguard.sets.django import FORMAT as DJANGO
from queueguard.sets.django import latest_applied
from queueguard.sets.model import heads_of, one_revision


def said(mset: MigrationSet | None, state: str | None) -> dict[str, Any]:
    """The fields of a document's entry that say the target's state."""
    if mset is not None and mset.format == DJANGO:
        return {"revision": None, "latestApplied": latest_applied(mset, state) if state else {}}
    # a target at several heads: null for the one revision, the list says which
    return {"revision": one_revision(state), "currentHeads": list(heads_of(state))}


def shown(entry: dict[str, Any]) -> str | None:
    """An entry's state on one line of text (None: nothing applied)."""
    latest = entry.get("latestApplied")
    if latest is not None:
        return ", ".join(f"{app}.{name}" for app, name in sorted(latest.items())) or None
    revision: str | None = entry.get("revision")
    return revision or ", ".join(entry.get("currentHeads") or []) or None


def said_target(mset: MigrationSet, state: str | None, one: str, many: str) -> dict[str, Any]:
    """The state a run brings its targets to: `one` the revision; for Django null, and
    `many` the migrations `migrate` is given (each app's leaves), as `plan` says them."""
    if mset.format == DJANGO:
        return {one: None, many: list(heads_of(state))}
    return {one: one_revision(state), many: list(heads_of(state))}


def shown_target(entry: dict[str, Any], one: str, many: str) -> str:
    """`said_target`'s fields on one line of text."""
    return entry.get(one) or ", ".join(entry.get(many) or []) or "nothing"
