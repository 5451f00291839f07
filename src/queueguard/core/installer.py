"""The runtime half's one hook into the upgrade half: the installer that gives an empty
database the head schema. The top-level package registers the upgrade framework's; the
runtime never imports it. Kept here, free of I/O, so that registering it costs no import of
the database driver (the command line starts without it)."""

from __future__ import annotations

from collections.abc import Callable

Installer = Callable[[str], object]

_registered: Installer | None = None


def register(installer: Installer) -> None:
    global _registered
    _registered = installer


def registered() -> Installer | None:
    return _registered
