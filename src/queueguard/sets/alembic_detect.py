"""Whether a folder is an Alembic project, told without importing Alembic or SQLAlchemy
(detection tries every format on every command: importing them cost a second and more on a
Django project's every command). `sets.alembic` reads the set.
"""

from __future__ import annotations

import os
from pathlib import Path

INI = "alembic.ini"


def _is_script_dir(path: Path) -> bool:
    return (path / "env.py").is_file() and (
        (path / "versions").is_dir() or (path / "script.py.mako").is_file()
    )


def _ini_script_location(ini: Path) -> Path | None:
    """The script directory an alembic.ini names (None if it names none that exists):
    `package:folder` inside an installed package, an absolute path or `%(here)s/…`, else a
    relative path taken against the ini's folder first and then, as Alembic itself takes
    it, the working directory (only right when run from the project root, where `alembic`
    is normally run)."""
    from alembic.config import Config  # imported here: detection must stay cheap
    from alembic.util import coerce_resource_to_filename

    try:
        location = Config(file_=str(ini)).get_main_option("script_location")
    except Exception:  # a broken ini is "not an Alembic project", not a crash in detect
        return None
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
    candidates = [ini.parent / path, Path.cwd() / path]
    return next((c for c in candidates if _is_script_dir(c)), candidates[0])


def detect(root: Path) -> bool:
    """Whether `root` is an Alembic script directory (env.py beside versions/ or
    script.py.mako), or the folder of an alembic.ini whose script_location names one.
    (queueguard's own migrations/ is one too: callers try the native format first.)"""
    if not root.is_dir():
        return False
    if _is_script_dir(root):
        return True
    ini = root / INI
    if not ini.is_file():
        return False
    location = _ini_script_location(ini)
    return location is not None and _is_script_dir(location)
