"""Content hashes of the migration set, and the chained manifest that freezes released ones.

A revision's hash covers its SQL step files (name and bytes, in name order). The manifest
chains them like Sqitch/atlas.sum: editing, removing or reordering a released revision
changes every later chain value, and the check names the first file that differs.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from queueguard.errors import TamperedMigration
from queueguard.resources import migrations_dir

MANIFEST = "manifest.json"


@dataclass(frozen=True)
class RevisionHash:
    revision: str
    sha256: str
    chain: str
    files: tuple[str, ...]


def step_files(revision: str, root: Path | None = None) -> list[Path]:
    """The SQL steps of one revision, in execution (name) order."""
    folder = (root or migrations_dir()) / "sql" / revision
    steps = sorted(folder.glob("*.sql"))
    if not steps:
        raise TamperedMigration(f"revision {revision}: no SQL steps in {folder}")
    return steps


def revision_sha256(revision: str, root: Path | None = None) -> str:
    digest = hashlib.sha256()
    for path in step_files(revision, root):
        digest.update(path.name.encode() + b"\n" + path.read_bytes() + b"\n")
    return digest.hexdigest()


def revisions(root: Path | None = None) -> list[str]:
    """Revision ids present on disk, in order."""
    folder = (root or migrations_dir()) / "sql"
    return sorted(p.name for p in folder.iterdir() if p.is_dir() and p.name.isdigit())


def compute(root: Path | None = None) -> list[RevisionHash]:
    chain = ""
    result = []
    for rev in revisions(root):
        sha = revision_sha256(rev, root)
        chain = hashlib.sha256(f"{chain}{rev}{sha}".encode()).hexdigest()
        names = tuple(f"sql/{rev}/{p.name}" for p in step_files(rev, root))
        result.append(RevisionHash(rev, sha, chain, names))
    return result


def load(root: Path | None = None) -> list[dict[str, str]]:
    data = json.loads(((root or migrations_dir()) / MANIFEST).read_text())
    entries: list[dict[str, str]] = data["revisions"]
    return entries


def write(root: Path | None = None) -> None:
    """Regenerate the manifest: a deliberate act when a new revision is released."""
    body = {
        "comment": "Chained content hashes of released revisions; see queueguard.manifest.",
        "revisions": [
            {"revision": r.revision, "sha256": r.sha256, "chain": r.chain} for r in compute(root)
        ],
    }
    ((root or migrations_dir()) / MANIFEST).write_text(json.dumps(body, indent=2) + "\n")


def verify(root: Path | None = None) -> list[str]:
    """Problems between the manifest and the files on disk (empty when intact)."""
    problems = []
    on_disk = {r.revision: r for r in compute(root)}
    released = load(root)
    chain = ""
    for entry in released:
        rev = entry["revision"]
        chain = hashlib.sha256(f"{chain}{rev}{entry['sha256']}".encode()).hexdigest()
        if chain != entry["chain"]:
            problems.append(
                f"manifest chain broken at revision {rev} (entries edited or reordered)"
            )
        found = on_disk.get(rev)
        if found is None:
            problems.append(f"released revision {rev} was removed (migrations/sql/{rev}/)")
        elif found.sha256 != entry["sha256"]:
            problems.append(
                f"released revision {rev} was edited: {', '.join(found.files)} "
                f"(sha256 {found.sha256[:12]}, manifest {entry['sha256'][:12]})"
            )
    order = [e["revision"] for e in released]
    if order != sorted(order):
        problems.append(f"released revisions are out of order: {order}")
    return problems


def require_intact(root: Path | None = None) -> None:
    problems = verify(root)
    if problems:
        raise TamperedMigration("; ".join(problems))
