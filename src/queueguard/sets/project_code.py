"""An exception raised by a set's own code (its env.py, a revision file), said in one line:
what was raised and where in the project's files — the last frame there, the line that
raised it or the project's call that led to it. A traceback through Alembic's and
queueguard's frames tells the user nothing they can act on; the line and the state of the
target do."""

from __future__ import annotations

import sys
import traceback
from pathlib import Path

from queueguard.pg.dsn import redact


def said(exc: BaseException, root: Path) -> str:
    """`ValueError: Found invalid records (at alembic/versions/a2.py:5)`, and for a module
    that does not import, which interpreter looked for it."""
    lines = redact(str(exc)).strip().splitlines()
    text = f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__
    where = _where(exc, root)
    text += f" (at {where})" if where else ""
    if isinstance(exc, ImportError) and exc.name:
        text += (
            f"; the project's code runs in queueguard's Python ({sys.executable}), where "
            f"{exc.name!r} does not import: install queueguard into the application's own "
            "environment"
        )
    return text


def _where(exc: BaseException, root: Path) -> str | None:
    root = root.resolve()
    frames = [(f.filename, f.lineno) for f in traceback.extract_tb(exc.__traceback__)]
    if isinstance(exc, SyntaxError) and exc.filename:  # the file that did not compile
        frames.append((exc.filename, exc.lineno))
    for filename, line in reversed(frames):
        try:
            inside = Path(filename).resolve().relative_to(root)
        except ValueError:
            continue
        return f"{inside}:{line}"
    return None
