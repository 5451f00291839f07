"""Alembic sets with branches and merge points, read and applied as Alembic reads and applies
them: the order of `alembic upgrade heads`, one `alembic_version` row per head, `--to` as
Alembic takes it, and a set left with several heads flagged by `lint` and `verify` (the
deploy that passes CI with two heads and then fails on `upgrade head`)."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest
from alembic import command

from queueguard.engine import catalog
from queueguard.engine.apply.runner import upgrade
from queueguard.engine.verify.checks import heads_check
from queueguard.errors import UsageError
from queueguard.lint.sets import lint_set
from queueguard.sets import alembic as fmt
from queueguard.sets.alembic_config import config
from queueguard.sets.alembic_render import NotRendered, rendered

PLAIN = Path(__file__).parent / "data" / "alembic_plain"
BASE = "3c2e70914d03"  # the plain project's head: the branches start there


def _revision(rev: str, down: str | tuple[str, ...], upgrade: str, label: str | None = None) -> str:
    labels = (label,) if label else None
    return (
        f'"""{rev}"""\n\nfrom alembic import op\n\nrevision = {rev!r}\n'
        f"down_revision = {down!r}\nbranch_labels = {labels!r}\ndepends_on = None\n\n\n"
        f"def upgrade() -> None:\n    op.execute({upgrade!r})\n"
    )


def _project(tmp_path: Path, merged: bool) -> Path:
    """The plain project, then two branches from its head — `left` (b4, b5) and `right`
    (c4) — and, when `merged`, their merge m6 and one more revision z7 after it."""
    root = tmp_path / ("merged" if merged else "two_heads")
    shutil.copytree(PLAIN, root)
    versions = root / "migrations" / "versions"
    files = {
        "b4": _revision("b4", BASE, "ALTER TABLE item ADD COLUMN b int", "left"),
        "b5": _revision("b5", "b4", "CREATE INDEX item_b ON item (b)"),
        "c4": _revision("c4", BASE, "ALTER TABLE item ADD COLUMN c int", "right"),
    }
    if merged:
        files["m6"] = _revision("m6", ("b5", "c4"), "ALTER TABLE item ADD COLUMN m int")
        files["z7"] = _revision("z7", "m6", "ALTER TABLE item ADD COLUMN z int")
    for name, text in files.items():
        (versions / f"{name}.py").write_text(text)
    return root


def _versions(dsn: str) -> list[str]:
    with psycopg.connect(dsn) as conn:
        return sorted(r[0] for r in conn.execute("SELECT version_num FROM alembic_version"))


def test_a_merged_set_is_read_in_alembics_order_with_one_head(tmp_path: Path) -> None:
    mset = fmt.load(_project(tmp_path, merged=True))
    ids = list(mset.ids)
    assert set(ids[-5:]) == {"b4", "b5", "c4", "m6", "z7"} and ids[-2:] == ["m6", "z7"]
    assert ids.index("b4") < ids.index("b5")  # each after its parents
    assert mset.heads == ("z7",) and mset.resolve(None) == mset.resolve("head") == "z7"
    assert mset.get("m6").down == "b5,c4"  # a merge's parents, as one state
    assert mset.resolve("right@head") == "z7"  # the branch merged: its head is the set's
    # from the left branch's end, what `alembic upgrade heads` applies, in its order
    assert [r.id for r in mset.pending("b5")] == ["c4", "m6", "z7"]
    assert [r.id for r in mset.pending(None, "c4")] == [*ids[:3], "c4"]  # c4's line only
    # a revision at a branch or merge point has no exact offline rendering (its version
    # row is not an UPDATE of one parent's): the online forms are refused there
    for rev in ("b4", "c4", "m6"):
        assert isinstance(rendered(mset, mset.get(rev)), NotRendered)


@pytest.mark.parametrize("start", [None, "2b1d6f803c02", BASE, "b4", "b5", "c4", "b5+c4", "m6"])
def test_upgraded_from_every_state_as_alembic_upgrade_heads_leaves_it(
    tmp_path: Path, make_db: Callable[..., str], start: str | None
) -> None:
    """From every revision of a set with a merge (and from the state of two heads, both
    branches' ends applied), queueguard's upgrade leaves the catalog and alembic_version
    exactly as `alembic upgrade heads` does."""
    root = _project(tmp_path, merged=True)
    mset = fmt.load(root)
    ours, theirs = make_db(), make_db()
    for dsn in (ours, theirs):
        for step in (start or "").split("+") if start else []:
            command.upgrade(config(root, dsn), step)
    before = _versions(ours) if start else []
    assert fmt.current(ours) == (",".join(before) or None)
    report = upgrade(mset, ours)
    command.upgrade(config(root, theirs), "heads")
    assert report.after == "z7" and _versions(ours) == _versions(theirs) == ["z7"]
    assert not catalog.differences(catalog.introspect(theirs), catalog.introspect(ours))


def test_a_set_with_two_heads_upgrades_both_and_refuses_head_as_alembic_does(
    tmp_path: Path, make_db: Callable[..., str]
) -> None:
    root = _project(tmp_path, merged=False)
    mset = fmt.load(root)
    assert mset.heads == ("b5", "c4") and mset.resolve(None) == "b5,c4"
    with pytest.raises(UsageError, match=r"2 heads \(b5, c4\): --to head would fail"):
        mset.resolve("head")
    ours, theirs = make_db(), make_db()
    report = upgrade(mset, ours, to="left@head")
    assert report.after == "b5" and "c4" not in report.applied
    report = upgrade(mset, ours)  # the default: every head, as `alembic upgrade heads`
    command.upgrade(config(root, theirs), "heads")
    assert report.after == "b5,c4" and report.applied == ["c4"]
    doc = report.as_json()  # one-revision fields null at several heads, the lists say which
    assert (doc["before"], doc["beforeHeads"]) == ("b5", ["b5"])
    assert (doc["after"], doc["afterHeads"]) == (None, ["b5", "c4"])
    assert (doc["target"], doc["targetHeads"]) == (None, ["b5", "c4"])
    assert _versions(ours) == _versions(theirs) == ["b5", "c4"]
    assert not catalog.differences(catalog.introspect(theirs), catalog.introspect(ours))
    # and the deploy that would fail on `upgrade head` is caught in CI
    check = heads_check(mset)
    assert not check.ok and "2 heads forked from a common ancestor: b5, c4" in check.detail
    flagged = lint_set(mset).flagged
    assert flagged[0].code == "migration.multiple_heads"
    assert "`upgrade head` would fail; merge them" in flagged[0].cost
