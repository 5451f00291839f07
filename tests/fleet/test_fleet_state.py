"""How the fleet's documents say a target's state (`fleet.state`, pure): a revision on one
line of revisions; a Django database's applied set as each app's latest applied migration,
the revision null, as the single-database documents say it."""

from __future__ import annotations

from pathlib import Path

from queueguard.fleet import board
from queueguard.fleet.state import said, said_target, shown, shown_target
from queueguard.sets import MigrationSet, Revision

IDS = ["auth.0001_initial", "shop.0001_initial", "auth.0002_email", "shop.0002_price"]


def _set(fmt: str, ids: list[str]) -> MigrationSet:
    revisions = tuple(
        Revision(rid, ids[i - 1] if i else None, rid, (), "", None) for i, rid in enumerate(ids)
    )
    return MigrationSet(format=fmt, root=Path("."), revisions=revisions)


def test_a_django_state_is_said_app_by_app() -> None:
    mset = _set("django", IDS)
    state = "auth.0001_initial,auth.0002_email,shop.0001_initial"
    entry = said(mset, state)
    assert entry == {
        "revision": None,
        "latestApplied": {"auth": "0002_email", "shop": "0001_initial"},
    }
    assert shown(entry) == "auth.0002_email, shop.0001_initial"
    assert (
        said(mset, None) == {"revision": None, "latestApplied": {}}
        and shown(said(mset, None)) is None
    )
    goal = said_target(mset, "auth.0002_email,shop.0002_price", "target", "targetHeads")
    assert goal == {"target": None, "targetHeads": ["auth.0002_email", "shop.0002_price"]}
    assert shown_target(goal, "target", "targetHeads") == "auth.0002_email, shop.0002_price"


def test_a_revision_on_a_line_is_said_as_it_is() -> None:
    mset = _set("sqldir", ["001", "002"])
    assert said(mset, "002") == {"revision": "002", "currentHeads": ["002"]}
    assert shown(said(mset, "002")) == "002"
    assert said_target(mset, "002", "head", "heads") == {"head": "002", "heads": ["002"]}


def test_the_board_of_a_django_run() -> None:
    row = ("t0", 1, "w", "done", "auth.0001_initial,shop.0001_initial", None, 1, 5, None, 1,
           "dsn", None, None, False, 0)  # fmt: skip
    doc = board.document(1, [row], mset=_set("django", IDS))
    (target,) = doc["targets"]
    assert target["revision"] is None
    assert target["latestApplied"] == {"auth": "0001_initial", "shop": "0001_initial"}
    assert "t0: done at auth.0001_initial, shop.0001_initial" in board.text(doc)
    assert "| auth.0001_initial, shop.0001_initial |" in board.markdown(doc)
