"""What every command module shares: the JSON envelope, the target database, the
migration set `--migrations` names (ours, or a set of another format).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from queueguard.errors import UsageError
from queueguard.pg.dsn import redact

if TYPE_CHECKING:
    from queueguard.revisions import SetFacts

Handler = Callable[[argparse.Namespace], int]


def _emit_json(doc: dict[str, Any]) -> None:
    doc = {"schemaVersion": 1, **doc}
    print(json.dumps(doc, indent=2, default=str, ensure_ascii=False))


def _output(args: argparse.Namespace) -> str:
    """`--output` (text, json, markdown; lint also github, sarif); `--json` is `--output json`."""
    chosen = getattr(args, "output", None)
    if getattr(args, "json", False):
        if chosen not in (None, "json"):
            raise UsageError(f"--json is --output json: give one of --json and --output {chosen}")
        return "json"
    return chosen or "text"


def _document(doc: dict[str, Any]) -> dict[str, Any]:
    """The document exactly as `--output json` prints it (paths and tuples as JSON has
    them), so every other rendering is a function of that document alone."""
    loaded: dict[str, Any] = json.loads(json.dumps({"schemaVersion": 1, **doc}, default=str))
    return loaded


def _emit(output: str, command: str, doc: dict[str, Any], text: Callable[[], str]) -> None:
    """Print a command's result as `--output` asks: its JSON document, the pull-request
    comment rendered from that document, or `text()` (nothing when it is empty)."""
    if output == "json":
        _emit_json(doc)
    elif output == "markdown":
        from queueguard import report

        print(report.comment(command, _document(doc)), end="")
    else:
        rendered = text()
        if rendered:
            print(rendered)


def _migrations(args: argparse.Namespace) -> SetFacts:
    """The migration set `--migrations DIR` names (default: the packaged one)."""
    from queueguard import revisions

    folder = getattr(args, "migrations", None)
    if folder and _is_other_format(args):
        from queueguard import sets

        raise UsageError(
            f"{folder} is a {sets.detect(Path(str(folder)).resolve())} migration set: "
            f"`{args.command}` works on queueguard's own; for a set of another format use "
            "status, plan, upgrade, rehearse, verify or lint"
        )
    return revisions.load(Path(folder)) if folder else revisions.packaged()


def _target(args: argparse.Namespace, *, fallback: bool) -> str:
    from queueguard.pg import targets

    dsn = targets.resolve(
        getattr(args, "dsn", None), embedded=getattr(args, "embedded", False), fallback=fallback
    )
    if not fallback:
        print(f"target: {redact(dsn)}", file=sys.stderr)
    return dsn


def _is_other_format(args: argparse.Namespace) -> bool:
    """A --migrations set of another format than ours (or --format saying so)."""
    from queueguard import sets

    fmt = getattr(args, "format", None)
    if fmt is not None:
        return bool(fmt != "queueguard")
    folder = getattr(args, "migrations", None)
    return bool(folder) and sets.detect(Path(str(folder)).resolve()) != "queueguard"


def _migration_set(args: argparse.Namespace) -> Any:
    """The migration set of `--migrations DIR` in any format (`--format` or detected;
    default: the packaged set)."""
    from queueguard import sets
    from queueguard.resources import migrations_dir

    folder = getattr(args, "migrations", None)
    fmt = getattr(args, "format", None)
    _django_options(args)
    if not folder and fmt == "django":  # the project the settings module names, installed
        return sets.load(Path.cwd(), fmt)
    if not folder:
        return sets.load(Path(str(migrations_dir())), fmt or "queueguard")
    # an Alembic env.py that cannot run offline is asked its version table on the --dsn given
    return sets.load(Path(folder), fmt, getattr(args, "dsn", None))


def _placed_to(args: argparse.Namespace, mset: Any, dsn: str) -> str | None:
    """`--to` as the absolute target it names for the database at `dsn`: Alembic's relative
    targets (`+2`, `BRANCH@+2`) count from where that database is, read once here (read
    only) so the runner, a retry after a lock timeout, plan and the report all see one
    target. A database whose version rows the set does not hold is refused here too."""
    to: str | None = getattr(args, "to", None)
    if mset.place is None:
        return to
    from queueguard.engine.plan.planner import current_revision

    placed: str | None = mset.placed(to, current_revision(mset, dsn))
    return placed


def _django_options(args: argparse.Namespace) -> None:
    """`--python`, `--settings`, `--database`, `--allow-custom-migrate`: how a Django
    project's code runs (read when its set is loaded)."""
    from queueguard.sets import django
    from queueguard.sets.django_start import Options

    django.OPTIONS = Options(
        python=getattr(args, "python", None),
        settings=getattr(args, "settings", None),
        alias=getattr(args, "database", None) or "default",
        allow_custom=bool(getattr(args, "allow_custom_migrate", False)),
    )


def upgrade_summary(report: Any) -> list[str]:
    """What `upgrade` says it did (a UpgradeReport), with or without --online."""
    if report.latest_applied is not None:  # Django: an applied set, said app by app
        latest = ", ".join(f"{a}.{n}" for a, n in sorted(report.latest_applied.items()))
        done = f"applied {', '.join(report.applied)}" if report.applied else "nothing to do"
        lines = [f"{done}; each app's latest: {latest or 'none'} ({report.elapsed_ms} ms)"]
    elif not report.applied:
        return [f"already at {report.after or report.before} (nothing to do)"]
    else:
        lines = [
            f"upgraded {report.before or 'empty'} -> {report.after} "
            f"(applied {', '.join(report.applied)}) in {report.elapsed_ms} ms"
        ]
    if report.resumed:
        lines.append(f"  resumed {', '.join(report.resumed)} where a previous run stopped")
    return [*lines, f"  lock waits: {report.lock_waits}"]
