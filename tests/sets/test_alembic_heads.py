"""Several heads judged by what they are: heads that each end a labelled base of their own
(independent histories, as Galaxy's `gxy` and `tsi`) are a note whose advice never merges
them; a fork from a common ancestor nobody merged stays a finding, its advice merging the
fork's heads alone — in `verify`'s `heads` check and `lint`'s `migration.multiple_heads`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from queueguard.cli import main
from queueguard.engine.verify.checks import heads_check
from queueguard.lint.sets import lint_set
from queueguard.lint.sets.rank import Tier
from queueguard.sets import alembic as fmt
from tests.sets import two_bases

#: the long line without its re-merge: m08 and m06c fork from m06b's history
FORKED = {k: v for k, v in two_bases.MAIN.items() if k not in ("m09", "m10")}


def test_heads_of_independent_labelled_bases_are_a_note_never_a_merge(tmp_path: Path) -> None:
    mset = fmt.load(two_bases.write(tmp_path / "p"))
    assert mset.heads == ("a02", "m10") and mset.conflicts == ()
    assert mset.independent == ("a02", "m10")
    check = heads_check(mset)
    assert check.ok and "alembic merge" not in check.detail
    assert "independent histories" in check.notes[0] and "a02 (aux)" in check.notes[0]
    assert "alembic merge" not in " ".join(check.notes)
    flagged = lint_set(mset).flagged[0]
    assert flagged.code == "migration.multiple_heads" and flagged.tier is Tier.NOTE
    assert "alembic merge" not in flagged.chosen.hint and "never merged" in flagged.chosen.hint


def test_a_fork_from_a_common_ancestor_stays_a_finding_merging_the_fork_alone(
    tmp_path: Path,
) -> None:
    mset = fmt.load(two_bases.write(tmp_path / "p", main=FORKED))
    assert mset.heads == ("a02", "m06c", "m08")
    assert mset.conflicts == ("m06c", "m08") and mset.independent == ("a02",)
    check = heads_check(mset)
    assert not check.ok and "2 heads forked from a common ancestor: m06c, m08" in check.detail
    assert "alembic merge m06c m08)" in check.detail  # the independent base left out
    assert "a02" in check.notes[0]
    flagged = lint_set(mset).flagged[0]
    assert flagged.tier is Tier.FAILS and flagged.chosen.hint.endswith("m06c m08")


def test_an_independent_base_without_a_label_is_told_to_take_one(tmp_path: Path) -> None:
    root = two_bases.write(tmp_path / "p")
    aux = root / "alembic" / "versions_aux" / "a01_x.py"
    aux.write_text(aux.read_text().replace("branch_labels = ('aux',)", "branch_labels = None"))
    mset = fmt.load(root)
    assert mset.conflicts == () and mset.independent == ("a02", "m10")
    what, advice = mset.independent_text()
    assert "a02 (no branch label)" in what and "give each base a branch label" in advice
    assert "alembic merge" not in advice


def test_verify_says_base_when_a_relation_comes_from_elsewhere_after_an_empty_first(
    tmp_path: Path, pg_admin_dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The set's first revision is empty, its second changes `workflow`, which no revision
    creates (the application's create_all() does): verify says --base; at two independent
    heads its document gives null for `head` and both in `heads`."""
    main_line = {
        "m01": (None, "main", "SELECT 1"),
        "m02": ("m01", None, "ALTER TABLE workflow ADD COLUMN x int"),
    }
    root = two_bases.write(tmp_path / "p", main=main_line)
    code = main(["verify", "--migrations", str(root), "--dsn", pg_admin_dsn, "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 1 and doc["head"] is None and doc["heads"] == ["a02", "m02"]
    chain = next(c for c in doc["checks"] if c["name"] == "chain")
    assert 'relation "workflow" does not exist' in chain["problems"][0]
    assert chain["problems"][1].endswith("give it with --base FILE")
    heads = next(c for c in doc["checks"] if c["name"] == "heads")
    assert heads["ok"] and "independent histories" in heads["notes"][0]
