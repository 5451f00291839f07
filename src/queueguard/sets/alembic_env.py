"""env.py in this process: one at a time, the process's logging restored after it, and libpq
options in the environment while it runs (`sets.alembic`)."""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager

#: Alembic keeps the running migration context in module globals (`alembic.context`,
#: `alembic.op`), and the statement hooks listen on the Engine class: one env.py at a time
#: per process (upgrade.runner has its own lock for queueguard's set, a layer above).
_ALEMBIC = threading.Lock()


@contextmanager
def _alembic_running() -> Iterator[None]:
    """One env.py at a time, and the process's logging as it was afterwards: a project's env.py
    usually calls `fileConfig`, which replaces the root logger's handlers and disables every
    logger that existed before it (the host's own)."""
    manager = logging.Logger.manager
    root = logging.getLogger()
    saved_root = (root.level, list(root.handlers))
    saved = {
        name: (lg.disabled, lg.level, list(lg.handlers), lg.propagate)
        for name, lg in manager.loggerDict.items()
        if isinstance(lg, logging.Logger)
    }
    with _ALEMBIC:
        try:
            yield
        finally:
            root.setLevel(saved_root[0])
            root.handlers[:] = saved_root[1]
            for name, (disabled, level, handlers, propagate) in saved.items():
                lg = logging.getLogger(name)
                lg.disabled, lg.propagate = disabled, propagate
                lg.setLevel(level)
                lg.handlers[:] = handlers


@contextmanager
def _pgoptions(options: str | None) -> Iterator[None]:
    """`options` in PGOPTIONS while env.py runs (under `_ALEMBIC`): an engine env.py builds
    from a URL of its own still gets lock_timeout and statement_timeout from libpq."""
    if not options:
        yield
        return
    saved = os.environ.get("PGOPTIONS")
    os.environ["PGOPTIONS"] = f"{saved} {options}" if saved else options
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("PGOPTIONS", None)
        else:
            os.environ["PGOPTIONS"] = saved
