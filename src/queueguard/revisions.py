"""The migration set's facts, in one place, read from its Alembic script directory.

Every revision file (`versions/<rev>.py`) names its predecessor (`down_revision`, Alembic's own
field) and may declare facts about itself as plain module-level literals:

- `protocol`: the runtime protocol hosts must speak once it is applied (default: the
  predecessor's; None before any revision declares one);
- `fences_older_hosts`: it fences every queue an older-protocol host may hold, so `upgrade`
  refuses while such hosts are connected (default False);
- `relocation_step`: the step file (stem) after which per-queue relocation is reported
  (default None);
- `ledger`: it records applied revisions in `queueguard_migrations` (default: the
  predecessor's; once on, stays on);
- `predates_lint`: released before `queueguard lint` existed, so the gate checks its hash but
  not its style (default False);
- `locks`: its lock budget, the exact lock it takes on each table that existed before it ran
  (`{"tasks": "ACCESS EXCLUSIVE"}`; see `queueguard.engine.locks`; default: none declared,
  which `upgrade` enforces as "no lock on any existing table");
- `online_locks`: for a revision with an online path, its lock ceiling: no transaction of
  `upgrade --online` may hold more on any table (default: none declared, enforced as "no lock
  on any table").

The files are parsed, not imported: reading the facts runs no code and needs neither Alembic
nor a database, so the runtime half may ask which revision is the head.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from queueguard.errors import UsageError
from queueguard.resources import migrations_dir

#: PostgreSQL's table lock modes, weakest first (its lock levels 1-8): the vocabulary of a
#: revision's lock budget.
LOCK_MODES = (
    "ACCESS SHARE",
    "ROW SHARE",
    "ROW EXCLUSIVE",
    "SHARE UPDATE EXCLUSIVE",
    "SHARE",
    "SHARE ROW EXCLUSIVE",
    "EXCLUSIVE",
    "ACCESS EXCLUSIVE",
)
#: Alembic's version table (revision ids are literally `001`, `002`, …).
VERSION_TABLE = "queueguard_version"
#: An online rollout's record (`queueguard upgrade --online`): it exists only while a rollout
#: is in progress, beside a version table still at the revision before its target.
ROLLOUT_TABLE = "queueguard_rollout"
#: Rollout phases in which hosts of the target's protocol may run (the window is open).
ROLLOUT_SERVING = ("migrate", "contract", "closing")
#: Tables of the released schemas; a database holding any of them without a version table
#: is not empty but unversioned (its revision cannot be known).
OUR_TABLES = frozenset(
    {
        "executions",
        "scheduled_tasks",
        "tasks",
        "task_queue_user_data",
        "task_queues",
        "runtime_protocol",
        "queueguard_migrations",
        VERSION_TABLE,
        ROLLOUT_TABLE,
    }
)


@dataclass(frozen=True)
class RevisionFacts:
    id: str
    down_revision: str | None
    title: str
    protocol: int | None
    fences_older_hosts: bool
    relocation_step: str | None
    ledger: bool
    predates_lint: bool = False
    #: the lock budget {table: MODE}; None when the revision declares none
    locks: dict[str, str] | None = field(default=None, hash=False)
    #: the online path's lock ceiling {table: MODE}; None when the revision declares none
    online_locks: dict[str, str] | None = field(default=None, hash=False)


@dataclass(frozen=True)
class SetFacts:
    """The ordered revisions of one script directory (root to head)."""

    root: Path
    revisions: tuple[RevisionFacts, ...]

    @property
    def ids(self) -> tuple[str, ...]:
        return tuple(r.id for r in self.revisions)

    @property
    def head(self) -> RevisionFacts:
        return self.revisions[-1]

    def get(self, revision: str) -> RevisionFacts:
        for r in self.revisions:
            if r.id == revision:
                return r
        raise UsageError(f"unknown revision {revision!r} (have {self.span})")

    @property
    def span(self) -> str:
        """`001…004`-style, for messages."""
        return f"{self.ids[0]}…{self.ids[-1]}"

    def previous(self, revision: str) -> str | None:
        return self.get(revision).down_revision

    def knows(self, revision: str | None) -> bool:
        return revision in self.ids

    def resolve(self, to: str) -> str:
        """`head` or a revision id; UsageError otherwise."""
        target = self.head.id if to == "head" else to
        if target not in self.ids:
            raise UsageError(f"--to takes {self.span} or head, got {to!r}")
        return target

    def pending(self, current: str | None, target: str) -> list[RevisionFacts]:
        """The revisions after `current` (None: an empty database) up to `target` (an id or
        `head`)."""
        ids = self.ids
        start = 0 if current is None else ids.index(current) + 1
        stop = ids.index(self.resolve(target)) + 1
        return list(self.revisions[start:stop])

    def at_or_after(self, revision: str, other: str) -> bool:
        """Whether `revision` is `other` or later in this set's order."""
        return self.ids.index(revision) >= self.ids.index(other)


def _literals(path: Path) -> tuple[dict[str, Any], str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: dict[str, Any] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            if isinstance(target, ast.Name):
                try:
                    found[target.id] = ast.literal_eval(node.value)
                except ValueError:
                    continue  # not a literal: not a fact we read
    doc = ast.get_docstring(tree) or ""
    return found, doc.strip().splitlines()[0] if doc.strip() else ""


def load(root: Path | None = None) -> SetFacts:
    """Read the script directory at `root` (default: the packaged migration set)."""
    root = Path(root) if root is not None else migrations_dir()
    folder = root / "versions"
    if not folder.is_dir():
        raise UsageError(f"{root} is not a migration set (no versions/ folder)")
    by_down: dict[str | None, list[dict[str, Any]]] = {}
    for path in sorted(folder.glob("*.py")):
        facts, title = _literals(path)
        if "revision" not in facts:
            continue
        facts["title"] = title
        facts["path"] = path
        by_down.setdefault(facts.get("down_revision"), []).append(facts)
    revisions: list[RevisionFacts] = []
    parent: str | None = None
    protocol: int | None = None
    ledger = False
    while parent in by_down or (parent is None and None in by_down):
        children = by_down.pop(parent, [])
        if len(children) != 1:
            names = ", ".join(str(c["revision"]) for c in children)
            raise UsageError(f"{folder}: revisions {names} all follow {parent}: one line expected")
        facts = children[0]
        protocol = facts.get("protocol", protocol)
        ledger = bool(facts.get("ledger", ledger))
        rev = RevisionFacts(
            id=str(facts["revision"]),
            down_revision=parent,
            title=facts["title"],
            protocol=protocol,
            fences_older_hosts=bool(facts.get("fences_older_hosts", False)),
            relocation_step=facts.get("relocation_step"),
            ledger=ledger,
            predates_lint=bool(facts.get("predates_lint", False)),
            locks=_budget(facts, "locks"),
            online_locks=_budget(facts, "online_locks"),
        )
        revisions.append(rev)
        parent = rev.id
    if by_down:
        orphans = ", ".join(str(f["revision"]) for fs in by_down.values() for f in fs)
        raise UsageError(f"{folder}: revisions {orphans} are not on the line from the root")
    if not revisions:
        raise UsageError(f"{folder}: no revisions")
    return SetFacts(root, tuple(revisions))


def _budget(facts: dict[str, Any], name: str) -> dict[str, str] | None:
    declared = facts.get(name)
    if declared is None:
        return None
    if not isinstance(declared, dict):
        raise UsageError(f"{facts['path']}: `{name}` must be a dict of table -> lock mode")
    budget = {}
    for table, mode in declared.items():
        normal = " ".join(str(mode).upper().removesuffix(" MODE").split())
        if normal not in LOCK_MODES:
            raise UsageError(f"{facts['path']}: `{name}`: unknown lock mode {mode!r} for {table}")
        budget[str(table)] = normal
    return budget


@cache
def packaged() -> SetFacts:
    """The migration set shipped in the package (what the runtime and the defaults use)."""
    return load()
