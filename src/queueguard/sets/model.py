"""A migration set in any format, as the runner and the tracer see it: an ordered line of
revisions, each a list of SQL statements (or, for Alembic, a Python revision run with its
statements captured), and the format's own bookkeeping.

Formats are adapters (`sets.temporal`, `sets.alembic`, `sets.sqldir`, `sets.native`): they
read a folder into `MigrationSet` and read/write their version tables; everything that applies
or traces statements is shared.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from queueguard.errors import UnknownRevisions, UsageError
from queueguard.sets.heads import forks, independent, independent_text

FORMATS = ("queueguard", "alembic", "temporal", "sqldir", "django")


#: on a revision's `native`: its statements are what a run of its own tool sent (a Django
#: migration as its migrate sent them on the sample), known again only by another run
CAPTURED = "captured"


@dataclass(frozen=True)
class Revision:
    """One revision of a set: `id` in the format's own spelling (`1.10`, `a1b2c3d4e5f6`,
    `0003`), applied after `down` (None: the first)."""

    id: str
    down: str | None
    title: str
    #: the files it applies, in order (Temporal: the manifest's list; sqldir: one file;
    #: Alembic: the revision's .py file)
    files: tuple[Path, ...]
    #: a digest of what it applies (sqldir: sha256 of the file's bytes), for tamper checks
    checksum: str
    #: SQL statements in order, split as PostgreSQL reads them; None for a Python revision
    #: (Alembic), whose statements are known only by running it
    statements: tuple[str, ...] | None
    #: the format's own facts (Temporal: min_compatible_version, manifest_md5, description)
    native: Mapping[str, Any] = field(default_factory=dict, hash=False)


@dataclass(frozen=True)
class MigrationSet:
    """The revisions of one folder, first to head, and the format that reads it."""

    format: str
    root: Path
    revisions: tuple[Revision, ...]
    #: tables the format's bookkeeping writes (left out of catalog comparisons)
    bookkeeping: frozenset[str] = frozenset()
    #: the version table of a set run by Alembic (ours: queueguard_version)
    version_table: str | None = None
    #: the order of any version string, for formats whose database may be at a version the
    #: folder does not list (Temporal's `0.0` after setup-schema); None: ids only
    order: Callable[[str], Any] | None = field(default=None, compare=False)
    #: a set whose revisions branch and merge (Alembic): the format's own answer to "what
    #: does upgrading from this state to that one apply, in what order" (ids), and to "what
    #: state is `--to`'s argument" (see `resolve`); None: one line, `revisions` in order
    steps: Callable[[str | None, str | None], list[str]] | None = field(default=None, compare=False)
    target_of: Callable[[str | None], str | None] | None = field(default=None, compare=False)
    #: a format whose `--to` may count from where a database is (Alembic's `+2`,
    #: `BRANCH@+2`): that argument as the absolute target it names for a database at a
    #: state (`placed`); None: every `--to` is absolute
    place: Callable[[str | None, str | None], str | None] | None = field(
        default=None, compare=False
    )
    #: how the format's own code runs (Django: the project, its interpreter and settings)
    runner: Any = field(default=None, compare=False)

    @property
    def ids(self) -> tuple[str, ...]:
        return tuple(r.id for r in self.revisions)

    @property
    def head(self) -> Revision | None:
        """The last revision in upgrade order (a set with several heads: see `heads`)."""
        return self.revisions[-1] if self.revisions else None

    @property
    def heads(self) -> tuple[str, ...]:
        """The revisions nothing comes after: one, unless the set branches and does not
        merge again (Alembic)."""
        if self.steps is None:
            return (self.revisions[-1].id,) if self.revisions else ()
        if self.format == "django" and self.target_of is not None:  # every app's leaves
            return heads_of(self.target_of(None))
        later = {p for r in self.revisions for p in heads_of(r.down)}
        return tuple(sorted(r.id for r in self.revisions if r.id not in later))

    @property
    def conflicts(self) -> tuple[str, ...]:
        """The heads that make a plain upgrade fail and a merge fixes: an Alembic set's
        heads that share history (a fork nobody merged; heads of independent bases are
        not, see `independent`); a Django app's several leaves (`migrate` refuses:
        conflicting migrations) — several apps' leaves are Django's normal state."""
        heads = self.heads
        if self.format == "django":
            apps = [h.partition(".")[0] for h in heads]
            return tuple(h for h, app in zip(heads, apps, strict=True) if apps.count(app) > 1)
        if len(heads) < 2:
            return ()
        return tuple(h for group in forks(self.revisions, heads) for h in group)

    @property
    def independent(self) -> tuple[str, ...]:
        """The heads that each end a history of their own (several bases, as Galaxy's
        `gxy` and `tsi`): heads by design, a note (`independent_text`), never a merge."""
        if self.format == "django" or self.steps is None:
            return ()
        return independent(self.revisions, self.heads)

    def independent_text(self) -> tuple[str, str]:
        """(what the independent heads are, what to do: never a merge)."""
        return independent_text(self.revisions, self.heads)

    def conflict_text(self) -> tuple[str, str]:
        """(what is wrong, how to fix it) for `conflicts`: each fork merged on its own."""
        found = self.conflicts
        if self.format == "django":
            return (
                f"{len(found)} leaf migrations in one app: {', '.join(found)} — `migrate` "
                "would refuse them (conflicting migrations); merge them",
                "python manage.py makemigrations --merge",
            )
        groups = forks(self.revisions, self.heads)
        return (
            f"{len(found)} heads forked from a common ancestor: {', '.join(found)} — "
            "`upgrade head` would fail; merge them",
            "; ".join(f"alembic merge -m 'merge heads' {' '.join(g)}" for g in groups),
        )

    def get(self, revision: str) -> Revision:
        for r in self.revisions:
            if r.id == revision:
                return r
        raise UsageError(f"unknown revision {revision!r} in {self.root} ({self.span})")

    @property
    def span(self) -> str:
        return f"{self.ids[0]}…{self.ids[-1]}" if self.ids else "no revisions"

    def end_of(self, revisions: Sequence[Revision]) -> str:
        """The state applying `revisions` (in upgrade order) ends in: the last of them on one
        line; on a set that branches, the heads among them (`state_of`), so that upgrading
        to it applies every one of them and nothing else."""
        if self.steps is None:
            return revisions[-1].id
        parents = {p for r in revisions for p in heads_of(r.down)}
        return state_of(r.id for r in revisions if r.id not in parents) or revisions[-1].id

    def resolve(self, to: str | None) -> str | None:
        """`--to`'s argument as a revision id: None or `head` → the head; Temporal's `v1.8`
        spelling is accepted for `1.8`. A set that branches says it itself (`target_of`): a
        state of several heads is their ids, sorted, joined by `,` (`heads_of`)."""
        if self.target_of is not None:
            return self.target_of(to)
        if to is None or to == "head":
            return self.head.id if self.head else None
        for candidate in (to, to.removeprefix("v")):
            if candidate in self.ids:
                return candidate
        raise UsageError(f"--to takes a revision of {self.root} ({self.span}) or head, got {to!r}")

    def placed(self, to: str | None, current: str | None) -> str | None:
        """`--to` for a database at `current`, made absolute (the same argument when the
        format has no relative targets, or it is not one): a relative target is placed
        once, before the run, so a run started again after a lock timeout does not count
        again from where the first one stopped."""
        self.refuse_unknown(current)
        return to if self.place is None else self.place(to, current)

    def at_head(self, at: str | None, to: str | None = None) -> bool:
        """Whether a database at `at` is at `to` (default: the head). A Django database's
        state is every migration it has applied, not a position: there when nothing is
        pending from it (not when going there would unapply something: `pending` refuses)."""
        if self.format == "django":
            try:
                return at is not None and not self.pending(at, to)
            except UsageError:
                return False
        return at == self.resolve(to)

    def pending(self, current: str | None, to: str | None = None) -> list[Revision]:
        """The revisions after `current` (None: nothing applied) up to `to` (default head)."""
        target = self.resolve(to)
        self.refuse_unknown(current)
        if target is None:
            return []
        if self.steps is not None:
            return [self.get(i) for i in self.steps(current, target)]
        ids = self.ids
        stop = ids.index(target) + 1
        if current is not None and current not in ids and self.order is not None:
            key = self.order
            return [r for r in self.revisions[:stop] if key(r.id) > key(current)]
        if current is not None and current not in ids:
            raise UsageError(
                f"the database is at {current!r}, which {self.root} does not have ({self.span})"
            )
        start = 0 if current is None else ids.index(current) + 1
        return list(self.revisions[start:stop])

    def refuse_unknown(self, state: str | None) -> None:
        """A database whose version rows name revisions the set does not hold cannot be
        placed: refused naming them, whatever the set holds (not "nothing to do", nor
        Alembic's first unlocatable id alone). Formats that order any version (Temporal,
        sqldir: `order`) and Django's applied sets (apps the project no longer has) place
        such a state themselves."""
        if self.order is not None or self.format == "django":
            return
        unknown = [h for h in heads_of(state) if h not in self.ids]
        if unknown:
            raise UnknownRevisions(
                f"the database's version rows name {', '.join(unknown)}, which {self.root} "
                f"does not hold ({self.span}): it cannot be placed in this set (another "
                "branch of the code, or a set of another project?)"
            )


def heads_of(state: str | None) -> tuple[str, ...]:
    """The revisions a state names: a database (or a target) at several heads of a set that
    branches is said as their ids, sorted, joined by `,`."""
    return tuple(state.split(",")) if state else ()


def state_of(heads: Any) -> str | None:
    """The one string for the heads a database is at (`heads_of`'s inverse)."""
    found = sorted(str(h) for h in (heads or ()))
    return ",".join(found) if found else None


def one_revision(state: str | None) -> str | None:
    """A document's one-revision field: the state when it names one revision, null when it
    names several heads (the document's list beside it says which)."""
    return None if state and "," in state else state


def stretches(revisions: list[Revision]) -> list[list[Revision]]:
    """`revisions` cut into runs of consecutive Python revisions (run together, as one
    `alembic upgrade` runs them) and SQL revisions, each of those alone."""
    found: list[list[Revision]] = []
    for rev in revisions:
        if found and rev.statements is None and found[-1][-1].statements is None:
            found[-1].append(rev)
        else:
            found.append([rev])
    return found
