"""Any Alembic project as a migration set: its revisions read by Alembic's own ScriptDirectory,
applied one at a time through the project's own env.py, every statement they send hooked.

Branches and merge points are read as Alembic reads them: the revisions in the order
`alembic upgrade heads` applies them from an empty database, what an upgrade applies from a
state (the heads `alembic_version` holds, one row each) in Alembic's own order
(`ScriptDirectory._upgrade_revs`, what `command.upgrade` runs), `--to` as Alembic takes it
(`heads`, a revision, `branch@head`; `head` refused on a set with several heads, as Alembic
refuses it). A state of several heads is their ids joined by `,` (`model.heads_of`).

The version table is the project's choice (`context.configure(version_table=…)` in env.py),
so it is learnt by running env.py the way `alembic current` does: under an
`EnvironmentContext` whose work function returns no steps, here in offline mode (no database
needed, nothing rendered), then read from the MigrationContext env.py configured. No SQL is
parsed and nothing of Alembic's is patched; an env.py that cannot run offline is run online,
read-only, when a DSN is at hand.

This module is the adapter (`detect`, `load`, `current`, `run`, `render`); its parts live
beside it: `alembic_config` (the script directory, alembic.ini and Alembic's Config),
`alembic_dsn` (a DSN as a SQLAlchemy URL and connection), `alembic_env` (one env.py at a
time in this process), `alembic_version_table` (which table, and which statements are
bookkeeping on it), `alembic_run` (one env.py run to a target, a hook per revision),
`alembic_tap` (every statement a running revision sends, at the driver) and `alembic_hooks`
(before/after hooks, and the refusal of another database).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path

from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import Script, ScriptDirectory
from alembic.script.revision import RevisionError, _relative_destination
from alembic.util import CommandError

from queueguard.errors import UsageError
from queueguard.sets.alembic_config import _script_directory, config, version_locations
from queueguard.sets.alembic_detect import detect
from queueguard.sets.alembic_dsn import READ_ONLY, _connected
from queueguard.sets.alembic_hooks import After, Before, around_of
from queueguard.sets.alembic_render import LINEAR, NotRendered, Rendered, rendered
from queueguard.sets.alembic_run import Hooks, Outcome
from queueguard.sets.alembic_run import upgrade as upgrade_to
from queueguard.sets.alembic_version_table import (
    DEFAULT_VERSION_TABLE,
    VersionTable,
    version_table,
)
from queueguard.sets.heads import LABELS
from queueguard.sets.model import MigrationSet, Revision, heads_of, state_of
from queueguard.sets.project_code import said

__all__ = [
    "DEFAULT_VERSION_TABLE",
    "FORMAT",
    "Hooks",
    "NotRendered",
    "Outcome",
    "Rendered",
    "current",
    "detect",
    "load",
    "render",
    "rendered",
    "run",
    "upgrade_to",
]

FORMAT = "alembic"


# --- detection ---------------------------------------------------------------------------


# --- reading the set ---------------------------------------------------------------------


def _ordered(script: ScriptDirectory, where: Path) -> list[Script]:
    """The revisions in the order `alembic upgrade heads` applies them to an empty
    database."""
    try:
        return [step.revision for step in script._upgrade_revs("heads", ())]  # type: ignore[arg-type]
    except CommandError as exc:
        raise UsageError(f"{where}: {exc}") from None
    except Exception as exc:  # a revision file that does not compile or import
        raise UsageError(f"{where}: a revision does not load: {said(exc, where)}") from exc


def _revision(script: Script, children: dict[str, int]) -> Revision:
    path = Path(script.path)
    parents = tuple(script._versioned_down_revisions)
    return Revision(
        id=script.revision,
        down=state_of(parents),
        title=(script.doc or "").strip(),
        files=(path,),
        checksum=hashlib.sha256(path.read_bytes()).hexdigest(),
        statements=None,  # Python: its statements are only known by running it
        # `alembic upgrade DOWN:REV --sql` writes its version row as an UPDATE of DOWN's:
        # exact only when DOWN is its one parent and it DOWN's one child (`alembic_render`)
        native={
            LINEAR: len(parents) <= 1 and all(children[p] == 1 for p in parents),
            LABELS: tuple(sorted(script.branch_labels)),
        },
    )


def _steps(script: ScriptDirectory, where: Path) -> Callable[[str | None, str | None], list[str]]:
    def steps(current: str | None, target: str | None) -> list[str]:
        try:
            found = script._upgrade_revs(heads_of(target), heads_of(current))  # type: ignore[arg-type]
        except (CommandError, RevisionError) as exc:
            raise UsageError(f"{where}: from {current or 'an empty database'}: {exc}") from None
        return [str(step.revision.revision) for step in found]

    return steps


def _relative(to: str) -> bool:
    """Whether `--to` counts from somewhere (`+2`, `BRANCH@+2`, `REV+2`, `REV-1`), as
    Alembic's own pattern tells it."""
    return _relative_destination.match(to) is not None


def _target_of(script: ScriptDirectory, where: Path) -> Callable[[str | None], str | None]:
    heads = tuple(script.get_heads())

    def target_of(to: str | None) -> str | None:
        if to is None:
            return state_of(heads)
        if to == "head" and len(heads) > 1:
            raise UsageError(
                f"{where} has {len(heads)} heads ({', '.join(sorted(heads))}): --to head "
                "would fail as `alembic upgrade head` fails; give heads, a revision or "
                "BRANCH@head"
            )
        if _relative(to):  # `placed` makes it absolute first, where a database is known
            raise UsageError(
                f"--to {to} counts from where a database is: give it to upgrade, plan or "
                "rehearse of one database (fleet takes a revision, heads or BRANCH@head)"
            )
        try:  # a state resolved already (several heads, `model.state_of`) names each
            # Alembic's own wording of a refusal, as `alembic upgrade` says it
            with script._catch_revision_errors(end=to):
                found = script.revision_map.get_revisions(heads_of(to) if "," in to else to)
        except (CommandError, RevisionError) as exc:
            raise UsageError(f"--to {to}: {exc}") from None
        state = state_of(r.revision for r in found if r is not None and not isinstance(r, str))
        if state is None:
            raise UsageError(f"--to {to}: names no revision (`alembic upgrade {to}` applies none)")
        return state

    return target_of


def _place(script: ScriptDirectory) -> Callable[[str | None, str | None], str | None]:
    def place(to: str | None, current: str | None) -> str | None:
        """A relative `--to` as the revision Alembic's `upgrade` walks to from `current`
        (its own `_parse_upgrade_target`, what `command.upgrade` runs); its refusal, with
        Alembic's reason, as `alembic upgrade` refuses."""
        if to is None or not _relative(to):
            return to
        try:
            script._upgrade_revs(to, heads_of(current))  # type: ignore[arg-type]
            found = script.revision_map._parse_upgrade_target(heads_of(current), to, True)
        except (CommandError, RevisionError) as exc:
            at = current or "an empty database"
            raise UsageError(f"--to {to} from {at}: {exc}") from None
        return state_of(r.revision for r in found if r is not None and not isinstance(r, str))

    return place


def load(root: Path, dsn: str | None = None) -> MigrationSet:
    """The project's revisions, base → head, and its version table as bookkeeping (env.py is
    run in offline mode to learn it, or online on `dsn`, read only, when it cannot run
    offline: see `version_table`)."""
    cfg = config(root, None)
    script = _script_directory(cfg)
    ordered = _ordered(script, root)
    if not ordered:
        raise UsageError(_empty(root, cfg))
    children = {s.revision: 0 for s in ordered}
    for s in ordered:
        for parent in s._versioned_down_revisions:
            children[parent] = children.get(parent, 0) + 1
    revisions = tuple(_revision(s, children) for s in ordered)
    table = version_table(root, dsn)
    linear = all(r.native[LINEAR] for r in revisions) and len(script.get_heads()) <= 1
    return MigrationSet(
        format=FORMAT,
        root=root,
        revisions=revisions,
        bookkeeping=frozenset({table.qualified}),
        version_table=table.qualified,
        steps=None if linear else _steps(script, root),
        target_of=_target_of(script, root),
        place=_place(script),
    )


def _empty(root: Path, cfg: Config) -> str:
    """Why a folder that is an Alembic project reads as no revisions: where Alembic looked.
    An empty set is refused, never "nothing to do": a database behind it would be called
    up to date (a version_locations split wrongly once made 82 revisions read as none)."""
    looked = [
        f"{where}{'' if Path(where).is_dir() else ' (no such folder)'}"
        for where in version_locations(cfg)
    ]
    return (
        f"{root}: Alembic finds no revisions; it looked in {', '.join(looked)} "
        f"(version_locations and path_separator of {cfg.config_file_name or 'no alembic.ini'})"
    )


# --- the database ------------------------------------------------------------------------


def current(dsn: str, table: str = DEFAULT_VERSION_TABLE) -> str | None:
    """The revision the database is at (None: an empty database or no version table), read by
    Alembic's own MigrationContext on the project's version table (`load(...).bookkeeping`,
    `schema.table` when qualified), on a read-only connection; no env.py is run."""
    version = VersionTable.parse(table)
    with _connected(dsn, READ_ONLY) as connection:
        context = MigrationContext.configure(
            connection,
            opts={"version_table": version.name, "version_table_schema": version.schema},
        )
        try:
            return state_of(context.get_current_heads())
        finally:
            connection.rollback()


def run(
    root: Path,
    dsn: str,
    revision_id: str,
    *,
    before: Before | None = None,
    after: After | None = None,
    options: str | None = None,
    mset: MigrationSet | None = None,
) -> Outcome:
    """Apply exactly one revision (the database must be where it is the one next step: at its
    down revision, or on a set that branches at heads it comes right after) through the
    project's env.py, calling `before(dbapi_connection, sql)` and `after(dbapi_connection,
    sql, seconds, error)` around every statement sent (caught at the driver), Alembic's
    own included (tell them apart with `is_bookkeeping(sql, table)`). The connection given
    to the hooks is psycopg's: a hook may query on it, in the statement's transaction
    (after a failed statement that transaction is aborted). `options`: see
    `alembic_run.upgrade`, which runs any number of revisions in one env.py run."""
    migrations = mset or load(root)
    revision = migrations.get(revision_id)
    at = current(dsn, migrations.version_table or DEFAULT_VERSION_TABLE)
    if [r.id for r in migrations.pending(at, revision.id)] != [revision.id]:
        raise UsageError(
            f"{revision.id} applies after {revision.down or 'an empty database'}, "
            f"but the database is at {at or 'no revision'}"
        )
    hooks = Hooks(around=around_of(before, after) if before or after else None)
    return upgrade_to(migrations, dsn, revision.id, hooks=hooks, options=options)


def render(migrations: MigrationSet, revision_id: str) -> str | None:
    """One revision's SQL as `alembic upgrade DOWN:REV --sql` renders it (offline: no
    database), Alembic's own bookkeeping and transaction control left out; None when the
    revision cannot be rendered offline (a data migration that reads rows, an env.py that
    always connects). The set as loaded: loading it again ran env.py once more per revision,
    and without the database an env.py that cannot run offline needs for its version table."""
    found = rendered(migrations, migrations.get(revision_id))
    if isinstance(found, NotRendered):
        return None
    return "".join(f"{s};\n" for s in found.statements)
