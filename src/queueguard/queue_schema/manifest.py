"""Content hashes of the migration set, and the chained manifest that freezes released ones.

A revision's hash covers its SQL step files (name and bytes, in name order). The manifest
chains them like Sqitch/atlas.sum: editing, removing or reordering a released revision
changes every later chain value. Each entry also lists its files' own hashes, so the check
names exactly the files that were edited, removed, added or renamed.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from queueguard.errors import TamperedMigration
from queueguard.resources import migrations_dir

MANIFEST = "manifest.json"


@dataclass(frozen=True)
class RevisionHash:
    revision: str
    sha256: str
    chain: str
    files: tuple[str, ...]
    #: (file, sha256 of its bytes) for each step file, in name order.
    file_hashes: tuple[tuple[str, str], ...] = ()


def step_files(revision: str, root: Path | None = None) -> list[Path]:
    """The SQL steps of one revision, in execution (name) order."""
    folder = (root or migrations_dir()) / "sql" / revision
    steps = sorted(folder.glob("*.sql"))
    if not steps:
        raise TamperedMigration(f"revision {revision}: no SQL steps in {folder}")
    return steps


def online_files(revision: str, root: Path | None = None) -> list[Path]:
    """The revision's online path (`sql/<rev>/online/*.sql`, named statements of
    `queueguard upgrade --online`), in name order; none for most revisions. Not part of the
    revision's hash: the hash names the released offline content the ledger records."""
    folder = (root or migrations_dir()) / "sql" / revision / "online"
    return sorted(folder.glob("*.sql"))


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
        steps = step_files(rev, root)
        names = tuple(f"sql/{rev}/{p.name}" for p in steps)
        hashes = tuple(
            (name, hashlib.sha256(p.read_bytes()).hexdigest())
            for name, p in zip(names, steps, strict=True)
        )
        result.append(RevisionHash(rev, sha, chain, names, hashes))
    return result


def load(root: Path | None = None) -> list[dict[str, Any]]:
    data = json.loads(((root or migrations_dir()) / MANIFEST).read_text())
    entries: list[dict[str, Any]] = data["revisions"]
    return entries


def write(root: Path | None = None) -> None:
    """Regenerate the manifest: a deliberate act when a new revision is released."""
    body = {
        "comment": (
            "Chained content hashes of released revisions; see queueguard.queue_schema.manifest."
        ),
        "revisions": [
            {
                "revision": r.revision,
                "sha256": r.sha256,
                "chain": r.chain,
                "files": dict(r.file_hashes),
            }
            for r in compute(root)
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
                f"released revision {rev} was edited: {_changed_files(found, entry)} "
                f"(sha256 {found.sha256[:12]}, manifest {entry['sha256'][:12]})"
            )
    order = [e["revision"] for e in released]
    if order != sorted(order):
        problems.append(f"released revisions are out of order: {order}")
    return problems


def _changed_files(found: RevisionHash, entry: dict[str, Any]) -> str:
    """Which files differ from the manifest's (every file, for an entry without file hashes)."""
    recorded: dict[str, str] = entry.get("files") or {}
    if not recorded:
        return ", ".join(found.files)
    on_disk = dict(found.file_hashes)
    changes = [
        f"{name} (edited)" for name in on_disk if recorded.get(name, on_disk[name]) != on_disk[name]
    ]
    changes += [f"{name} (removed)" for name in recorded if name not in on_disk]
    changes += [f"{name} (added)" for name in on_disk if name not in recorded]
    # Same files with the same bytes but a different revision hash: only the order changed.
    return ", ".join(changes) or f"{', '.join(found.files)} (order)"


def require_intact(root: Path | None = None) -> None:
    problems = verify(root)
    if problems:
        raise TamperedMigration("; ".join(problems))
