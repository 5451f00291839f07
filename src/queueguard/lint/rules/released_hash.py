"""migration.tampered: a released migration's content matches the checked-in manifest.

Released revisions are frozen history: users' databases record their hashes, so an edit
(even to a comment) is drift. `queueguard.queue_schema.manifest.verify` names every edited,
removed, added or reordered file; each problem becomes one finding located at the file it
names (line 1), else at the manifest. No inline marker can silence it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

from queueguard.errors import TamperedMigration
from queueguard.lint.model import Corpus, Finding, Rule
from queueguard.queue_schema import manifest

CODE = "migration.tampered"
HINT = (
    "restore the released file byte for byte (git checkout); put the change in a new "
    "revision. Regenerate manifest.json only when releasing a new revision"
)
_NAMED_FILE = re.compile(r"sql/\d+/[^\s,()]+\.sql")


def check(corpus: Corpus) -> Iterator[Finding]:
    for root in corpus.migration_roots:
        yield from _check_root(root)


def _check_root(root: Path) -> Iterator[Finding]:
    manifest_path = (root / manifest.MANIFEST).resolve()
    try:
        problems = manifest.verify(root)
    except FileNotFoundError:
        problems = [f"{manifest.MANIFEST} is missing: released revisions cannot be verified"]
    except (TamperedMigration, json.JSONDecodeError, KeyError, TypeError) as exc:
        problems = [f"{manifest.MANIFEST} or a released revision is unreadable: {exc}"]
    for problem in problems:
        yield Finding(CODE, _located(root, problem) or manifest_path, 1, 1, problem, HINT)


def _located(root: Path, problem: str) -> Path | None:
    """The first file the problem names that exists on disk."""
    for name in _NAMED_FILE.findall(problem):
        path: Path = root / name
        if path.is_file():
            return path.resolve()
    return None


RULE = Rule(CODE, "a released migration's content hash matches the manifest", check, False)
