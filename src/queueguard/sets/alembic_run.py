"""Running an Alembic project's revisions: one run of its env.py from wherever the database
is to a target, as `alembic upgrade TARGET` runs it, with a hook at each revision's start
and end and every statement caught at the driver (`sets.alembic_tap`).

The revisions are driven by Alembic itself: an `EnvironmentContext` whose work function
yields the steps `command.upgrade` would (`ScriptDirectory._upgrade_revs`, what that command
calls), and whose `configure` — the call env.py makes — adds queueguard's
`on_version_apply` hook to env.py's own and, unless env.py says otherwise, one transaction
per revision (`transaction_per_migration`): a failure then leaves the revisions before it
applied, and a lock timeout retries only the revision that hit it. The version table env.py
configures online is checked against the one it configured offline before any revision runs.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import psycopg
import sqlalchemy as sa
from alembic.runtime.environment import EnvironmentContext
from alembic.runtime.migration import MigrationContext, MigrationInfo
from alembic.util import CommandError, to_tuple

from queueguard.errors import MigrationError, QueueguardError, UsageError
from queueguard.pg.connect import reason as driver_reason
from queueguard.sets.alembic_config import _script_directory, config
from queueguard.sets.alembic_dsn import _connected, with_options
from queueguard.sets.alembic_env import _alembic_running, _pgoptions
from queueguard.sets.alembic_tap import Around, OnCommit, tapped
from queueguard.sets.alembic_version_table import DEFAULT_VERSION_TABLE, VersionTable
from queueguard.sets.alembic_version_table import is_bookkeeping as _is_bookkeeping
from queueguard.sets.model import MigrationSet, heads_of, state_of
from queueguard.sets.project_code import said

#: session settings the driver sends (SQLAlchemy reads the isolation level on entering
#: autocommit_block()): not a revision's statements
_SETTING = re.compile(r"^\s*(SET|RESET|SHOW)\s", re.IGNORECASE)
#: started(revision): its first statement is next
Started = Callable[[str], None]
#: applied(revision, connection): its statements and version row are done, its transaction
#: not yet committed; the connection is psycopg's, a hook may query on it
Applied = Callable[[str, psycopg.Connection[Any]], None]


@dataclass
class Hooks:
    around: Around | None = None
    on_commit: OnCommit | None = None
    started: Started | None = None
    applied: Applied | None = None


@dataclass
class Sent:
    """One statement a revision sent (not Alembic's bookkeeping)."""

    revision: str
    sql: str
    #: it ran outside a transaction (autocommit_block(), or an env.py in autocommit)
    autocommit: bool
    started: float  # perf_counter at its start
    seconds: float = 0.0
    #: from its start to its transaction's commit (outside a transaction: its own time)
    held_s: float | None = None
    error: BaseException | None = None


@dataclass
class Outcome:
    """What one run did: where the database was, the revisions applied, those of them
    committed (seen at the driver: an env.py that runs every revision in one transaction of
    its own commits them together, at the end), and each revision's statements."""

    before: str | None = None
    applied: list[str] = field(default_factory=list)
    committed: list[str] = field(default_factory=list)
    sent: list[Sent] = field(default_factory=list)
    running: str | None = None

    def of(self, revision: str) -> list[Sent]:
        return [s for s in self.sent if s.revision == revision]


class _Environment:
    """env.py's `context` with queueguard's per-revision hook: an EnvironmentContext whose
    configure() — set on the instance, which is what `from alembic import context` hands
    env.py (the module proxy reads the instance's attributes) — adds `on_version_apply`."""

    def __init__(self, *args: Any, on_applied: Callable[..., None], **kw: Any) -> None:
        self.context = EnvironmentContext(*args, **kw)
        configure = self.context.configure

        def configure_with_hook(*c_args: Any, **c_kw: Any) -> None:
            c_kw.setdefault("transaction_per_migration", True)
            own = to_tuple(c_kw.get("on_version_apply"), default=())
            c_kw["on_version_apply"] = (*own, on_applied)
            configure(*c_args, **c_kw)

        self.context.configure = configure_with_hook  # type: ignore[method-assign]


@dataclass(eq=False)  # its methods are callbacks: compared and hashed by identity
class _Recording:
    """What the driver's tap and Alembic's per-revision hook record of a run in its `outcome`
    (each statement a revision sends and how long its locks were held, the commits, the
    revisions applied), passing each on to the caller's `hooks`."""

    hooks: Hooks
    outcome: Outcome
    #: the version table env.py configured offline: its statements are bookkeeping
    expected: VersionTable

    def around(self, conn: psycopg.Connection[Any], sql: str, execute: Callable[[], Any]) -> Any:
        if self.outcome.running is None:  # the driver's and Alembic's own, before a revision
            return execute()
        if _is_bookkeeping(sql, self.expected.qualified) or _SETTING.match(sql):
            return self.hooks.around(conn, sql, execute) if self.hooks.around else execute()
        sent = Sent(self.outcome.running, sql, conn.autocommit, time.perf_counter())
        self.outcome.sent.append(sent)
        try:
            return self.hooks.around(conn, sql, execute) if self.hooks.around else execute()
        except BaseException as exc:
            sent.error = exc
            raise
        finally:
            sent.seconds = time.perf_counter() - sent.started
            if sent.autocommit:
                sent.held_s = sent.seconds

    def on_commit(self, conn: psycopg.Connection[Any]) -> None:
        ended = time.perf_counter()
        self.outcome.committed = list(self.outcome.applied)
        for sent in self.outcome.sent:
            if sent.held_s is None:
                sent.held_s = ended - sent.started  # its locks were held until now
        if self.hooks.on_commit is not None:
            self.hooks.on_commit(conn)

    def on_applied(self, ctx: MigrationContext, step: MigrationInfo, **_kw: Any) -> None:
        revision = str(step.up_revision_id)
        self.outcome.applied.append(revision)
        self.outcome.running = None
        if self.hooks.applied is not None:
            raw = ctx.connection.connection.dbapi_connection if ctx.connection else None
            if isinstance(raw, psycopg.Connection):
                self.hooks.applied(revision, raw)


#: what a set's first revision fails with when its first tables come from the application
#: (mlflow, for one, runs create_all() and then its revisions): undefined table, column,
#: object, function, schema
_NEEDS_A_BASE = frozenset({"42P01", "42703", "42704", "42883", "3F000"})


def _failure(
    outcome: Outcome,
    exc: BaseException,
    root: object,
    first: str | None = None,
    reason: str | None = None,
) -> MigrationError:
    """The failed revision, what it sent last and what of it stays: as the SQL formats
    say it. Statements it ran in autocommit_block() committed (and, on entering the block,
    what it ran before it); otherwise its transaction rolled back. `first`: the set's first
    revision, which, failing for an object it does not create, says where those come from."""
    revision = outcome.running
    if revision is None:
        return MigrationError(f"{root}: env.py failed before any revision: {driver_reason(exc)}")
    sent = outcome.of(revision)
    failed = next((s for s in reversed(sent) if s.error is not None), None)
    if any(s.autocommit for s in sent):
        kept = (
            "it ran statements in autocommit_block(): those, and what it ran before the "
            "block, stay applied; its version row was not written"
        )
    elif outcome.committed or not outcome.applied:
        kept = "its transaction rolled back"
    else:  # the revisions before it were in the same transaction: they rolled back too
        kept = "env.py runs the revisions in one transaction: nothing was changed"
    if outcome.committed:
        kept += f" (the revisions before it, {', '.join(outcome.committed)}, stay applied)"
    text = f"\n  {' '.join(failed.sql.split())[:200]}" if failed is not None else ""
    sqlstate = getattr(exc, "sqlstate", None)
    if revision == first and outcome.before is None and sqlstate in _NEEDS_A_BASE:
        text += (
            "\nthe set's first revision changes objects no revision creates: they come from "
            "the application itself (its create_all() or first start), which must make them "
            "before the revisions run (verify takes them with --base FILE)"
        )
    reason = reason or driver_reason(exc)
    error = MigrationError(f"revision {revision} failed ({reason}); {kept}{text}")
    error.sqlstate = sqlstate
    return error


def upgrade(
    mset: MigrationSet,
    dsn: str,
    target: str,
    *,
    hooks: Hooks | None = None,
    options: str | None = None,
    outcome: Outcome | None = None,
) -> Outcome:
    """Run the project's env.py once, applying every revision after the database's up to
    `target`; `options` (libpq's, e.g. `-c lock_timeout=5000`) ride on every connection
    (in sqlalchemy.url for an env.py that builds its own engine, on the connection in
    `config.attributes["connection"]` for one that takes the caller's, and in PGOPTIONS).
    A failed statement raises MigrationError naming the revision and the statement; the
    `outcome` (pass one to read it after a failure) holds what ran."""
    hooks = hooks or Hooks()
    outcome = outcome if outcome is not None else Outcome()
    expected = VersionTable.parse(mset.version_table or DEFAULT_VERSION_TABLE)

    recording = _Recording(hooks, outcome, expected)
    with _connected(dsn, options) as connection:
        cfg = config(mset.root, with_options(dsn, options), connection=connection)
        script = _script_directory(cfg)

        def steps(heads: Any, context: MigrationContext) -> Iterator[Any]:
            online = VersionTable(context.version_table, context.version_table_schema)
            if online != expected:
                raise MigrationError(
                    f"{mset.root}: env.py configures version table {online.qualified} online "
                    f"but {expected.qualified} offline: queueguard reads the version from "
                    "the offline one; make them the same"
                )
            outcome.before = state_of(to_tuple(heads, default=()))
            # what command.upgrade runs (a state of several heads: the tuple of them)
            for step in script._upgrade_revs(heads_of(target), heads):  # type: ignore[arg-type]
                outcome.running = str(step.revision.revision)
                if hooks.started is not None:
                    hooks.started(outcome.running)
                yield step

        env = _Environment(
            cfg, script, fn=steps, destination_rev=heads_of(target), on_applied=recording.on_applied
        )
        first = mset.revisions[0].id if mset.revisions else None
        try:
            with (
                _alembic_running(),
                tapped(dsn, recording.around, recording.on_commit),
                _pgoptions(options),
                env.context,
            ):
                script.run_env()
            connection.commit()  # the shared connection's transaction, if env.py left one
            outcome.committed = list(outcome.applied)
        except CommandError as exc:
            raise UsageError(f"{mset.root}: {exc}") from None
        except sa.exc.DBAPIError as exc:
            raise _failure(outcome, exc.orig or exc, mset.root, first) from exc
        except psycopg.Error as exc:  # sent through the DBAPI cursor itself
            raise _failure(outcome, exc, mset.root, first) from exc
        except QueueguardError:
            raise
        except Exception as exc:  # the project's own code: env.py or a revision
            if outcome.running is None:
                raise UsageError(
                    f"{mset.root}: env.py failed before any revision: {said(exc, mset.root)}"
                ) from exc
            raise _failure(outcome, exc, mset.root, first, said(exc, mset.root)) from exc
    return outcome
