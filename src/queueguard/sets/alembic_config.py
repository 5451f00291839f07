"""An Alembic project's configuration: where its script directory and alembic.ini are, and
the Alembic Config and ScriptDirectory on them that the adapter (`sets.alembic`) runs."""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from alembic.config import Config
from alembic.script import ScriptDirectory
from alembic.util import CommandError

from queueguard.errors import UsageError
from queueguard.sets.alembic_detect import (
    INI,
    PYPROJECT,
    _ini_script_location,
    _is_script_dir,
    _toml_script_location,
    config_script_location,
)
from queueguard.sets.alembic_dsn import sqlalchemy_url


def _names(ini: Path, folder: Path) -> bool:
    """Whether `ini`'s script_location is `folder` (so the ini is that project's)."""
    location = _ini_script_location(ini)
    return location is not None and location.resolve() == folder


def _locate(root: Path) -> tuple[Path, Path | None, Path | None]:
    """(script directory, alembic.ini or None, pyproject.toml with `[tool.alembic]` or None)
    of a project folder.

    A folder holding env.py and versions/ *is* the script directory, whatever an ini's
    script_location says: an application installed as a package ships its alembic.ini
    inside that folder with a script_location relative to wherever it was built (it sets
    the real one in code), so the ini is read for its other options only. Its ini is the
    one inside it, else the one in its parent folder (`alembic init`'s layout) when that
    ini names it; none at all works too. A folder without an ini may hold its options in
    pyproject.toml (`alembic init --template pyproject`)."""
    root = root.resolve()
    if _is_script_dir(root):
        inside, parent = root / INI, root.parent / INI
        if inside.is_file():
            return root, inside, None
        return root, parent if parent.is_file() and _names(parent, root) else None, None
    ini, pyproject = root / INI, root / PYPROJECT
    location, named = config_script_location(root)
    if named is None:
        raise UsageError(f"{root} is not an Alembic project (no env.py and versions/)")
    if location is None:
        raise UsageError(f"{named} names no script_location")
    if not _is_script_dir(location):
        raise UsageError(f"{named}: script_location {location} is not an Alembic folder")
    toml = pyproject if pyproject.is_file() and _toml_script_location(pyproject) else None
    return location.resolve(), ini if ini.is_file() else None, toml


def ini_value(url: sa.URL) -> str:
    """A URL as a value ConfigParser reads back unchanged: Alembic's Config interpolates `%`
    (`%(here)s`), and a password's `%` and `@` are already %-quoted by the URL."""
    return url.render_as_string(hide_password=False).replace("%", "%%")


class _Anchored(Config):
    """Alembic's Config, reading every option as Alembic does (`path_separator` and its
    legacy default decide how `version_locations` and `prepend_sys_path` are split), with
    the relative entries of those two lists taken from the ini's folder.

    Why: `alembic` is run from the project's folder, so `.` and `versions_x` mean that
    folder to it; queueguard may run anywhere. The lists are anchored after Alembic split
    them, never rewritten: a rewritten option would have to be joined again with some
    separator, and the ini's own separator is the only one its entries are sure not to
    hold (Galaxy's `version_locations = a;b` with `path_separator = ;`)."""

    def __init__(self, here: Path, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._here = here

    def get_version_locations_list(self) -> list[str] | None:
        return _anchored(self._here, super().get_version_locations_list())

    def get_prepend_sys_paths_list(self) -> list[str] | None:
        return _anchored(self._here, super().get_prepend_sys_paths_list())


def _anchored(here: Path, entries: list[str] | None) -> list[str] | None:
    """Relative entries taken from `here` (`_anchor`)."""
    if entries is None:
        return None
    return [_anchor(here, entry) for entry in entries if entry]


def _anchor(here: Path, entry: str) -> str:
    """A relative entry taken from `here`; absolute entries, and `package:folder` resources
    (Alembic's spelling of a folder inside an installed package), as they are."""
    anchored = here / entry
    if os.path.isabs(entry) or (":" in entry and not anchored.exists()):
        return entry
    return str(anchored.resolve())


def config(root: Path, dsn: str | None, **attributes: Any) -> Config:
    """An Alembic Config on the project at `root`: its own alembic.ini when it has one (so an
    env.py calling `fileConfig(config.config_file_name)` works), script_location made
    absolute, sqlalchemy.url the target (`postgresql+psycopg://`; a bare placeholder when
    `dsn` is None). `attributes` go to `config.attributes`, e.g. `connection=` a live
    SQLAlchemy Connection for an env.py that takes one (Alembic's cookbook recipe)."""
    script_dir, ini, toml = _locate(root)
    # Alembic's own messages go to a buffer, not sys.stdout (as upgrade.alembic_config does).
    here = next((f.parent for f in (ini, toml) if f is not None), script_dir)
    cfg = _Anchored(
        here,
        file_=str(ini) if ini else None,
        toml_file=str(toml) if toml else None,
        stdout=io.StringIO(),
    )
    cfg.set_main_option("script_location", str(script_dir))
    url = sqlalchemy_url(dsn) if dsn is not None else sa.URL.create("postgresql+psycopg")
    cfg.set_main_option("sqlalchemy.url", ini_value(url))
    cfg.attributes.update(attributes)
    return cfg


def version_locations(cfg: Config) -> list[str]:
    """Where Alembic looks for the revisions of `cfg`'s project: its version_locations
    (split and anchored as `_Anchored` reads them), else the script directory's versions/."""
    try:
        found = cfg.get_version_locations_list()
    except ValueError as exc:  # a path_separator Alembic refuses
        raise UsageError(f"{cfg.config_file_name}: {exc}") from None
    return found or [str(Path(str(cfg.get_main_option("script_location"))) / "versions")]


def _script_directory(cfg: Config) -> ScriptDirectory:
    try:
        return ScriptDirectory.from_config(cfg)
    except (CommandError, ValueError) as exc:  # ValueError: a path_separator Alembic refuses
        raise UsageError(f"{cfg.get_main_option('script_location')}: {exc}") from None
