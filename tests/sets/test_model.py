"""sets.model: the line of revisions every format reads into, and what is pending (pure)."""

from __future__ import annotations

from pathlib import Path

import pytest

from queueguard.errors import UsageError
from queueguard.sets.model import MigrationSet, Revision


def line(*ids: str, order: bool = False) -> MigrationSet:
    revisions = []
    down = None
    for revision in ids:
        revisions.append(
            Revision(revision, down, f"title {revision}", (Path(f"{revision}.sql"),), "x", ())
        )
        down = revision
    key = (lambda v: tuple(int(p) for p in v.split("."))) if order else None
    return MigrationSet("sqldir", Path("/set"), tuple(revisions), order=key)


def test_ids_head_and_span() -> None:
    mset = line("1", "2", "10")
    assert mset.ids == ("1", "2", "10")
    assert mset.head is not None and mset.head.id == "10"
    assert mset.span == "1…10"
    empty = line()
    assert empty.ids == ()
    assert empty.head is None
    assert empty.span == "no revisions"


def test_get_finds_a_revision_or_names_the_set() -> None:
    mset = line("1", "2")
    assert mset.get("2") is mset.revisions[1]
    with pytest.raises(UsageError, match=r"unknown revision '3' in /set \(1…2\)"):
        mset.get("3")


def test_resolve_takes_head_a_revision_or_its_v_spelling() -> None:
    mset = line("1.8", "1.9")
    assert mset.resolve(None) == "1.9"
    assert mset.resolve("head") == "1.9"
    assert mset.resolve("1.8") == "1.8"
    assert mset.resolve("v1.8") == "1.8"
    with pytest.raises(UsageError, match=r"--to takes a revision of /set \(1\.8…1\.9\) or head"):
        mset.resolve("2.0")
    assert line().resolve(None) is None
    assert line().resolve("head") is None


def test_a_revision_named_like_a_v_spelling_is_taken_as_written() -> None:
    mset = line("v1", "1")
    assert mset.resolve("v1") == "v1"


def test_pending_from_nothing_from_a_revision_and_up_to_a_target() -> None:
    mset = line("1", "2", "3")
    assert [r.id for r in mset.pending(None)] == ["1", "2", "3"]
    assert [r.id for r in mset.pending("1")] == ["2", "3"]
    assert mset.pending("3") == []
    assert [r.id for r in mset.pending(None, to="2")] == ["1", "2"]
    assert [r.id for r in mset.pending("1", to="2")] == ["2"]
    assert [r.id for r in mset.pending("1", to="head")] == ["2", "3"]
    assert line().pending(None) == []


def test_pending_from_a_version_the_folder_does_not_list() -> None:
    ordered = line("1", "2", "10", order=True)
    # compared by the format's order, not as text; equal versions are not pending
    assert [r.id for r in ordered.pending("3")] == ["10"]
    assert [r.id for r in ordered.pending("0")] == ["1", "2", "10"]
    assert [r.id for r in ordered.pending("01")] == ["2", "10"]  # 01 is 1
    assert [r.id for r in ordered.pending("0", to="2")] == ["1", "2"]
    with pytest.raises(UsageError, match=r"version rows name 3, which /set does not hold"):
        line("1", "2", "10").pending("3")
