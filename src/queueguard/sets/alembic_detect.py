"""Whether a folder is an Alembic project, told without importing Alembic or SQLAlchemy
(detection tries every format on every command: importing them cost a second and more on a
Django project's every command). `sets.alembic` reads the set.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

INI = "alembic.ini"
PYPROJECT = "pyproject.toml"


def _is_script_dir(path: Path) -> bool:
    return (path / "env.py").is_file() and (
        (path / "versions").is_dir() or (path / "script.py.mako").is_file()
    )


def _ini_script_location(ini: Path) -> Path | None:
    """The script directory an alembic.ini names (None if it names none that exists)."""
    from alembic.config import Config  # imported here: detection must stay cheap

    try:
        location = Config(file_=str(ini)).get_main_option("script_location")
    except Exception:  # a broken ini is "not an Alembic project", not a crash in detect
        return None
    return _resolved(location, ini.parent)


def _toml_script_location(pyproject: Path) -> Path | None:
    """The script directory a pyproject.toml's `[tool.alembic]` names (Alembic 1.16 and later
    read their options there, an alembic.ini beside it or not), `%(here)s` its folder."""
    try:
        data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return None
    location = data.get("tool", {}).get("alembic", {}).get("script_location")
    if not isinstance(location, str):
        return None
    return _resolved(location.replace("%(here)s", str(pyproject.parent)), pyproject.parent)


def _resolved(location: str | None, folder: Path) -> Path | None:
    """A script_location as Alembic takes it: `package:folder` inside an installed package,
    an absolute path, else a relative path taken against the config's folder first and
    then, as Alembic itself takes it, the working directory (only right when run from the
    project root, where `alembic` is normally run)."""
    from alembic.util import coerce_resource_to_filename

    if not location:
        return None
    # `package:folder` names a folder inside an installed package (Alembic's own spelling).
    if ":" in location and not os.path.isabs(location) and not Path(location).exists():
        try:
            return Path(coerce_resource_to_filename(location))
        except Exception:
            return None
    path = Path(location)
    if path.is_absolute():
        return path
    candidates = [folder / path, Path.cwd() / path]
    return next((c for c in candidates if _is_script_dir(c)), candidates[0])


def detect(root: Path) -> bool:
    """Whether `root` is an Alembic script directory (env.py beside versions/ or
    script.py.mako), or the folder of an alembic.ini whose script_location names one.
    or of a pyproject.toml whose `[tool.alembic]` names one. (queueguard's own migrations/
    is one too: callers try the native format first.)"""
    if not root.is_dir():
        return False
    if _is_script_dir(root):
        return True
    location = config_script_location(root)[0]
    return location is not None and _is_script_dir(location)


def config_script_location(root: Path) -> tuple[Path | None, Path | None]:
    """(the script directory, the file naming it) of the configuration in `root`: the
    alembic.ini's script_location, else pyproject.toml's `[tool.alembic]` one (Alembic's
    pyproject template keeps alembic.ini for logging and the URL only)."""
    ini, pyproject = root / INI, root / PYPROJECT
    if ini.is_file() and (location := _ini_script_location(ini)) is not None:
        return location, ini
    if pyproject.is_file() and (location := _toml_script_location(pyproject)) is not None:
        return location, pyproject
    return None, ini if ini.is_file() else pyproject if pyproject.is_file() else None
