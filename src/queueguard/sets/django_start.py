"""Where a Django project is, how its code runs, and its runner's process started — with the
standard library only, so that the command line can start the runner first thing
(`early`), before queueguard's own imports.

The runner's start is one Python start and Django's own modules imported (`django.db.models`,
the migration machinery: two tenths of a second before any of the project's code), then,
when queueguard sends `setup`, the project's settings and `django.setup()`. Started by
`early`, the first part runs on the other core while queueguard imports its own modules and
parses the command; nothing of the project runs before `setup`, which carries the target's
connection fields as always (`sets.django_process.Runner`). A process `early` started and
no command adopted (the command failed first, or read another set) is ended at exit.
"""

from __future__ import annotations

import argparse
import ast
import atexit
import contextlib
import os
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from queueguard.errors import UsageError
from queueguard.sets import alembic_detect

RUNNER = Path(__file__).with_name("django_runner")
#: the commands that read a Django project through `--migrations` / `--format django`
_COMMANDS = frozenset({"status", "upgrade", "plan", "verify", "rehearse", "lint"})


@dataclass(frozen=True)
class Project:
    """Where a Django project is and how its code runs."""

    root: Path  # the folder of its manage.py (the runner's working directory)
    settings: str
    python: str
    alias: str = "default"
    allow_custom: bool = False


@dataclass(frozen=True)
class Options:
    """What the command line says about a Django project (`--python`, `--settings`,
    `--database`, `--allow-custom-migrate`)."""

    python: str | None = None
    settings: str | None = None
    alias: str = "default"
    allow_custom: bool = False


def detect(root: Path) -> bool:
    """A Django project: the folder of a manage.py that names a settings module."""
    manage = root / "manage.py"
    if not manage.is_file():
        return False
    text = manage.read_text(encoding="utf-8", errors="replace")
    return "DJANGO_SETTINGS_MODULE" in text or "django" in text


def manage_py_settings(root: Path) -> str | None:
    """The settings module `manage.py` sets (`os.environ.setdefault("DJANGO_SETTINGS_MODULE",
    "x.settings")`), read with `ast`, never executed."""
    manage = root / "manage.py"
    if not manage.is_file():
        return None
    try:
        tree = ast.parse(manage.read_text(encoding="utf-8"))
    except (SyntaxError, UnicodeDecodeError):
        return None
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or len(node.args) < 2:
            continue
        key, value = node.args[0], node.args[1]
        if (
            isinstance(key, ast.Constant)
            and key.value == "DJANGO_SETTINGS_MODULE"
            and isinstance(value, ast.Constant)
            and isinstance(value.value, str)
        ):
            return value.value
    return None


def project(root: Path, options: Options) -> Project:
    """The project at `root`: settings from `--settings`, else `DJANGO_SETTINGS_MODULE`, else
    what manage.py sets; the interpreter from `--python`, else ours (where Django must then
    import: the runner's setup says so if it does not)."""
    settings = options.settings or os.environ.get("DJANGO_SETTINGS_MODULE")
    settings = settings or manage_py_settings(root)
    if not settings:
        raise UsageError(
            f"{root}: no settings module (give --settings MODULE, set DJANGO_SETTINGS_MODULE, "
            "or run from a project whose manage.py sets it)"
        )
    python = options.python or sys.executable
    return Project(root, settings, python, options.alias, options.allow_custom)


@dataclass
class Process:
    """A runner's process and its two channels: commands in, events out."""

    popen: subprocess.Popen[bytes]
    commands: IO[str]
    events: IO[str]


def spawn(proj: Project) -> Process:
    """The runner started in the project's interpreter and folder; it imports Django's own
    modules and waits for `setup`."""
    commands_r, commands_w = os.pipe()
    events_r, events_w = os.pipe()
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": proj.settings}
    if proj.python != sys.executable:  # another environment: not our paths
        env.pop("PYTHONPATH", None)
    try:
        popen = subprocess.Popen(
            [proj.python, str(RUNNER), "--commands", str(commands_r), "--events", str(events_w)],
            cwd=proj.root,
            pass_fds=(commands_r, events_w),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=env,
        )
    except OSError as exc:
        os.close(commands_w)
        os.close(events_r)
        raise UsageError(f"cannot run {proj.python} (--python): {exc}") from None
    finally:
        os.close(commands_r)
        os.close(events_w)
    return Process(
        popen,
        os.fdopen(commands_w, "w", encoding="utf-8"),
        os.fdopen(events_r, "r", encoding="utf-8"),
    )


#: the runner `early` started, by the project it was started for
_EARLY: dict[Project, Process] = {}


def early(argv: Sequence[str]) -> None:
    """Start the runner now when the command line names a Django project (`requested`)."""
    found = requested(argv)
    if found is None:
        return
    try:
        proj = project(*found)
        if proj not in _EARLY:
            _EARLY[proj] = spawn(proj)
    except UsageError:
        return  # the command itself says so, in its turn
    atexit.register(end_unadopted)


def requested(argv: Sequence[str]) -> tuple[Path, Options] | None:
    """The project a command line names, read as the command's parser will: `--format
    django` (the folder of `--migrations`, else this one), or `--migrations DIR` holding a
    Django project and no marker of another format (a folder that may be read otherwise is
    left to the normal start); None for any other command line."""
    if not argv or argv[0] not in _COMMANDS or {"-h", "--help"} & set(argv):
        return None
    parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False, exit_on_error=False)
    for option in ("--migrations", "--format", "--python", "--settings"):
        parser.add_argument(option)
    parser.add_argument("--database", default="default")
    parser.add_argument("--allow-custom-migrate", action="store_true")
    try:
        known, _ = parser.parse_known_args(argv[1:])
    except (argparse.ArgumentError, SystemExit):  # the command's own parser says what
        return None
    if known.format not in (None, "django"):
        return None
    root = Path(known.migrations) if known.migrations else None
    if root is None and known.format == "django":
        root = Path.cwd()  # the project the settings module names, installed
    if root is None or (known.format is None and not _only_django(root)):
        return None
    options = Options(known.python, known.settings, known.database, known.allow_custom_migrate)
    return root.resolve(), options


def _only_django(root: Path) -> bool:
    if not root.is_dir() or not detect(root) or alembic_detect.detect(root):
        return False
    return not any(root.glob("manifest.json")) and not any(root.glob("*/manifest.json"))


def adopt(proj: Project) -> Process | None:
    """The runner `early` started for this very project, if it did (taken once)."""
    return _EARLY.pop(proj, None)


def end_unadopted() -> None:
    """A runner no command took (the command failed first, or read another set): its
    channel closed, it ends at once (it exits on EOF). Called when a command returns, and
    at exit."""
    for process in _EARLY.values():
        with contextlib.suppress(OSError):
            process.commands.close()
        with contextlib.suppress(OSError):
            process.events.close()
    _EARLY.clear()
