"""The repository explains itself: no tracked file points at documents outside it.

Design notes, source documents and issue trackers are not part of the repository, so a
reader cannot follow a reference to them. What users and contributors need lives in `docs/`;
refer to a page there instead (e.g. `docs/interfaces.md "Exit codes"`).
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
#: This file spells the references out in its examples.
SELF = Path(__file__).resolve().relative_to(ROOT.resolve()).as_posix()
#: References to documents outside the repository.
OUTSIDE = re.compile(
    r"DESIGN\.md"  # the design notes the docs were written from
    r"|\.\./shared\b"  # a folder next to the checkout
    r"|\bseeds/"  # the source documents' folder
    r"|\b[Ii]ssues? #?\d+"  # an issue number: "issue 7", "issue #7"
    r"|\(#\d+\)"  # a pull-request or issue number: "(#7)"
)


def tracked_files() -> list[str]:
    try:
        out = subprocess.run(
            ["git", "-C", str(ROOT), "ls-files", "-z"],
            capture_output=True,
            check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    return [name for name in out.decode().split("\0") if name and name != SELF]


def outside_references(text: str) -> list[str]:
    """`line: text` for every line of `text` that refers to something outside the repo."""
    return [
        f"{number}: {line.strip()}"
        for number, line in enumerate(text.splitlines(), start=1)
        if OUTSIDE.search(line)
    ]


def test_no_references_outside_the_repository() -> None:
    found = []
    for name in tracked_files():
        path = ROOT / name
        if not path.is_file():  # deleted in the work tree, not yet committed
            continue
        data = path.read_bytes()
        if b"\0" in data:  # binary
            continue
        found += [f"{name}:{hit}" for hit in outside_references(data.decode("utf-8", "replace"))]
    assert not found, "references to documents outside the repository:\n" + "\n".join(found)


@pytest.mark.parametrize(
    ("line", "outside"),
    [
        ('see DESIGN.md "Interfaces"', True),
        ("the notes in ../shared/", True),
        ("seeds/002_review.txt", True),
        ("What it does (issue 3):", True),
        ("fixed in issue #12", True),
        ("the fence (#6)", True),
        ('see docs/interfaces.md "Exit codes"', False),
        ("rnd = random.Random(seed)", False),
        ("SELECT 1 -- statements a v0.2 host issued", False),
        ("## 1. Preflight", False),
        ("tissue 3", False),
    ],
)
def test_pattern(line: str, outside: bool) -> None:
    assert bool(outside_references(line)) is outside
