"""A Django project as a migration set (`--format django`): its migrations read by Django's
own loader, in the project's interpreter (`django_process`, `django_runner`).

A revision id is `app_label.migration_name`. A Django database's applied state is not a
position on one line: it is the set of migrations `django_migrations` holds, said here as
their ids sorted and joined by `,` (`model.state_of`), and what an upgrade from it applies is
Django's own `migration_plan`, in its order (asked of the runner, with that applied set). A
target is the migrations `migrate` is given: every app's leaves (plain `migrate`), or one
(`--to app_label.name`, what `migrate app_label name` applies). Documents say the state as it
is: `latestApplied`, each app's latest applied migration (`latest_applied`).
"""

from __future__ import annotations

import atexit
import hashlib
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path
from typing import Any

from queueguard.errors import MigrationError, QueueguardError, UsageError
from queueguard.pg.sqlfiles import queries
from queueguard.sets.django_process import Runner
from queueguard.sets.django_start import Options, Project, project
from queueguard.sets.model import MigrationSet, Revision, heads_of, state_of

FORMAT = "django"
BOOKKEEPING_TABLE = "django_migrations"
#: the project's facts kept on each revision's `native`
ATOMIC, REPLACES, OPERATIONS, PYTHON = "atomic", "replaces", "operations", "python"
#: on a migration run as its captured SQL (`upgrade --online`): what returns the statements
#: of Django's fake path for it, compiled by the project's runner when they are to run
RECORD = "record"
Q = queries("queueguard.sets", "django.sql")

#: the command line's word on a Django project (`--python`, `--settings`, `--database`),
#: set by the CLI before a set is loaded
OPTIONS = Options()


def _revision(entry: dict[str, Any]) -> Revision:
    path = Path(entry["path"]) if entry.get("path") else None
    ops = entry["operations"]
    title = "; ".join(str(op["describe"]) for op in ops[:3]) + ("; …" if len(ops) > 3 else "")
    digest = hashlib.sha256(path.read_bytes()).hexdigest() if path and path.is_file() else ""
    return Revision(
        id=entry["id"],
        down=state_of(entry["dependencies"]),
        title=title,
        files=(path,) if path else (),
        checksum=digest,
        statements=None,  # Python: known only by running Django's migrate
        native={
            ATOMIC: entry["atomic"],
            REPLACES: tuple(entry["replaces"]),
            OPERATIONS: tuple(ops),
            PYTHON: any(op["python"] for op in ops),
        },
    )


class Graph:
    """One runner kept for the set's life: the graph and Django's plans of it, and — when
    the command names a target — connected to it, read only, so that reading the target's
    applied set and (switched to writing) `upgrade`'s migrate need no runner of their own:
    each runner's start is the project's django.setup(), a second or more for a large
    project. Another thread (a fleet's targets) gets a runner of its own for its database;
    the graph's questions are asked one at a time."""

    def __init__(self, proj: Project, dsn: str | None = None) -> None:
        self.project = proj
        self.dsn = dsn
        self._runner: Runner | None = None
        self._lock = threading.RLock()

    @property
    def runner(self) -> Runner:
        with self._lock:
            if self._runner is None:
                self._runner = Runner(self.project, self.dsn, read_only=self.dsn is not None)
                atexit.register(self._runner.close)
            return self._runner

    @contextmanager
    def borrow(
        self, dsn: str | None, *, read_only: bool = False, settings: Mapping[str, str] = {}
    ) -> Iterator[Runner]:
        """A runner on `dsn` with these session settings (None: no database, while the
        target is copied). The main thread's is the set's own, pointed there for a while (a
        scratch copy's capture, an upgrade) and then back at the command's target, read
        only; a runner an error left in an unknown state is stopped, and the next use starts
        one. Another thread's is its own (a fleet's targets run side by side)."""
        if threading.current_thread() is not threading.main_thread():
            own = Runner(self.project, dsn, read_only=read_only, settings=settings)
            try:
                yield own
            except BaseException:
                own.kill()  # it may be waiting mid-conversation, deaf to "quit"
                raise
            own.close()
            return
        with self._lock:
            runner = self.runner
            here = dsn == self.dsn and read_only == (self.dsn is not None) and not settings
            try:
                if not here:
                    runner.retarget(dsn, read_only=read_only, settings=settings)
                yield runner
            except BaseException:
                runner.kill()
                self._runner = None  # the next use starts one
                raise
            runner.running = None
            if not here:
                try:
                    runner.retarget(self.dsn, read_only=self.dsn is not None)
                except QueueguardError:  # what it was lent for is done: the next use starts one
                    runner.kill()
                    self._runner = None

    def graph(self) -> dict[str, Any]:
        with self._lock:
            return self.runner.ask("graph")

    @lru_cache(maxsize=256)  # noqa: B019 (one graph a process)
    def plan(self, applied: str | None, targets: str | None) -> tuple[tuple[str, bool], ...]:
        with self._lock:
            found = self.runner.ask(
                "plan", applied=list(heads_of(applied)), targets=list(heads_of(targets))
            )
        return tuple((s["id"], bool(s["backwards"])) for s in found["steps"])


def load(root: Path, options: Options | None = None, dsn: str | None = None) -> MigrationSet:
    """The project's migrations in the order `migrate` applies them to an empty database,
    each squash's originals just before it (a database with some of them applied runs
    them). `dsn`: the command's target, which the set's runner connects to (`Graph`)."""
    proj = project(root, options or OPTIONS)
    graph = Graph(proj, dsn)
    found = graph.graph()
    revisions = tuple(_revision(m) for m in found["migrations"])
    leaves = state_of(found["leaves"])
    ids = {r.id for r in revisions}
    return MigrationSet(
        format=FORMAT,
        root=root,
        revisions=revisions,
        bookkeeping=frozenset({BOOKKEEPING_TABLE}),
        steps=_steps(graph, root, leaves),
        target_of=_target_of(ids, leaves),
        runner=graph,
    )


def _steps(
    graph: Graph, root: Path, leaves: str | None
) -> Callable[[str | None, str | None], list[str]]:
    def steps(current: str | None, target: str | None) -> list[str]:
        # every app's leaves (plain `migrate`): the leaves of the graph as the applied set
        # shapes it (a squash some of whose originals are applied gives way to them)
        try:
            found = graph.plan(current or "", None if target == leaves else target)
        except MigrationError as exc:
            raise UsageError(str(exc).split("\n")[0]) from None
        backwards = [rid for rid, back in found if back]
        if backwards:
            raise UsageError(
                f"migrating {root} to {target} would unapply {', '.join(backwards)}: "
                "queueguard never unapplies a migration"
            )
        return [rid for rid, _ in found]

    return steps


def _target_of(ids: set[str], leaves: str | None) -> Callable[[str | None], str | None]:
    def target_of(to: str | None) -> str | None:
        if to is None or to in ("head", "heads"):
            return leaves
        if "," in to and all(t in ids for t in heads_of(to)):
            return to
        if to in ids:
            return to
        raise UsageError(f"--to takes app_label.migration_name or head, got {to!r}")

    return target_of


def migrate_targets(mset: MigrationSet, revisions: Sequence[Revision]) -> list[str]:
    """What `migrate` is given to apply `revisions` (in Django's order): nothing when they
    end at every app's leaves, else each end among them. An end is what Django calls a
    leaf: a migration no other migration of its own app depends on. A migration depending
    on a squash's original depends on the squash where the squash is applied in its place
    (as Django's loader rewires the graph): else the squash would count as an end, and
    `migrate app squash` after the later ones would unapply them."""
    replaced_by = {old: r.id for r in revisions for old in r.native.get(REPLACES, ())}
    parents = {
        replaced_by.get(p, p)
        for r in revisions
        for p in heads_of(r.down)
        if p.partition(".")[0] == r.id.partition(".")[0]  # its own app's
    }
    # an original beside its squash is the squash's (both are in a chain's applied set)
    end = state_of(r.id for r in revisions if r.id not in parents and r.id not in replaced_by)
    if end is None or end == mset.resolve(None):
        return []
    return list(heads_of(end))


def current(mset: MigrationSet, dsn: str) -> str | None:
    """The migrations the database has applied (its `django_migrations`, read by Django's
    recorder on a read-only connection), as one state string; None when none is."""
    with graph_of(mset).borrow(dsn, read_only=True) as runner:
        return state_of(runner.ask("applied")["applied"])


def applied_state(conn: Any) -> str | None:
    """`current`, read on a connection to the database in the transaction it is in (the
    runner's own, under the runner lock: `upgrade --online` between its statements)."""
    row = conn.execute(Q["has_table"]).fetchone()
    if not row or not row[0]:
        return None
    return state_of(r[0] for r in conn.execute(Q["applied"]).fetchall())


def latest_applied(mset: MigrationSet, state: str | None) -> dict[str, str]:
    """{app_label: its latest applied migration} in the set's order (a migration the project
    no longer has, by name)."""
    applied = set(heads_of(state))
    latest: dict[str, str] = {}
    known = set()
    for revision in mset.revisions:
        known.add(revision.id)
        if revision.id in applied:
            app, _, name = revision.id.partition(".")
            latest[app] = name
    for rid in sorted(applied - known):
        app, _, name = rid.partition(".")
        latest.setdefault(app, name)
    return latest


def graph_of(mset: MigrationSet) -> Graph:
    if not isinstance(mset.runner, Graph):
        raise UsageError(f"{mset.root}: not a Django project set")
    return mset.runner


def _project(mset: MigrationSet) -> Project:
    return graph_of(mset).project
