"""General PostgreSQL migration rules: run squawk, parse its JSON, map its findings.

squawk (https://squawkhq.com) is the field's migration linter: indexes without CONCURRENTLY,
constraints without NOT VALID, SET NOT NULL, volatile defaults, type changes, renames, drops,
missing lock/statement timeouts, and more. We do not re-implement any of it. The `squawk-cli`
wheel ships the binary; its version is pinned (`SQUAWK_VERSION`) because its rule set changes
between releases and the gate must give the same answer everywhere.

How squawk is run (documented in docs/lint.md):
- `--assume-in-transaction`: queueguard's runner wraps each revision in one transaction
  (env.py, `transaction_per_migration`), so squawk judges the files as they really run
  (e.g. a table created earlier in the same revision is not "existing").
- `--pg-version`: the oldest PostgreSQL major CI tests (`PG_VERSION`).
- `--config` the null device: no `.squawk.toml` found by walking up from the working
  directory can change the rule set. Every exception is an inline marker in the file.
Each finding becomes `squawk.<rule-name>` at squawk's location (0-based there, 1-based here).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Any

from queueguard.errors import QueueguardError
from queueguard.lint.model import Finding, SqlFile

SQUAWK_VERSION = "2.70.0"
#: The oldest PostgreSQL major CI runs (Debian bookworm's 15; the embedded server is 18).
PG_VERSION = "15.0"
ENV_BINARY = "QUEUEGUARD_SQUAWK"
INSTALL = f"pip install 'squawk-cli=={SQUAWK_VERSION}' (or pip install 'queueguard[lint]')"
DOCS = "https://squawkhq.com/docs/"
TIMEOUT_S = 120
_SQUAWK_IGNORE = re.compile(r"squawk-ignore")


class SquawkUnavailable(QueueguardError):
    """squawk is missing, is not the pinned version, or failed: the gate cannot run."""

    exit_code = 2


def locate() -> Path:
    """The squawk binary: $QUEUEGUARD_SQUAWK, else beside this Python, else on PATH."""
    configured = os.environ.get(ENV_BINARY)
    if configured:
        if not Path(configured).is_file():
            raise SquawkUnavailable(f"{ENV_BINARY}={configured}: no such file")
        return Path(configured)
    exe = "squawk.exe" if sys.platform == "win32" else "squawk"
    for folder in (Path(sys.executable).parent, Path(sysconfig.get_path("scripts"))):
        if (folder / exe).is_file():
            return folder / exe
    found = shutil.which("squawk")
    if found is None:
        raise SquawkUnavailable(f"squawk is not installed; queueguard lint needs it: {INSTALL}")
    return Path(found)


@cache
def checked_version(binary: Path) -> str:
    """The binary's version; anything but the pinned one is refused."""
    try:
        out = subprocess.run(
            [str(binary), "--version"], capture_output=True, text=True, timeout=30, check=True
        ).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        raise SquawkUnavailable(f"cannot run {binary}: {exc}") from None
    version = out.strip().removeprefix("squawk").strip()
    if version != SQUAWK_VERSION:
        raise SquawkUnavailable(
            f"{binary} is squawk {version or '(unknown)'}, but queueguard lint is pinned to "
            f"{SQUAWK_VERSION}: {INSTALL}"
        )
    return version


def run(files: Sequence[SqlFile], binary: Path | None = None) -> list[Finding]:
    """squawk's findings on these migration files (one squawk process for all of them).

    squawk's own `-- squawk-ignore` comments would silence findings without a justification;
    files holding one are linted from a copy in which they are defused (same length, same
    lines), so the only way to silence squawk is a justified `-- lint-allow` marker.
    """
    if not files:
        return []
    binary = binary or locate()
    checked_version(binary)
    with tempfile.TemporaryDirectory(prefix="queueguard-lint-") as scratch:
        by_path: dict[str, Path] = {}
        for i, file in enumerate(files):
            target = file.path
            # a defused copy, or SQL that is not the file's own text (an Alembic revision's
            # rendered SQL stands for its .py file; a goose or dbmate file's up section alone)
            if (
                _SQUAWK_IGNORE.search(file.text)
                or file.path.suffix != ".sql"
                or file.text != file.path.read_text(encoding="utf-8")
            ):
                target = Path(scratch) / f"{i}_{file.path.stem}.sql"
                target.write_text(_SQUAWK_IGNORE.sub("squawk-defuse", file.text), "utf-8")
            by_path[str(target)] = file.path
        reported = _invoke(binary, list(by_path))
    return [_finding(item, by_path) for item in reported]


def _invoke(binary: Path, paths: list[str]) -> list[dict[str, Any]]:
    command = [
        str(binary),
        "--reporter",
        "json",
        "--config",
        os.devnull,
        "--assume-in-transaction",
        f"--pg-version={PG_VERSION}",
        *paths,
    ]
    try:
        proc = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT_S)
    except (OSError, subprocess.SubprocessError) as exc:
        raise SquawkUnavailable(f"squawk failed to run: {exc}") from None
    try:
        reported = json.loads(proc.stdout or "[]")
    except json.JSONDecodeError:
        reported = None
    if proc.returncode not in (0, 1) or not isinstance(reported, list):
        detail = (proc.stderr or proc.stdout).strip().splitlines()[:3]
        raise SquawkUnavailable(f"squawk exited {proc.returncode}: {' '.join(detail)}")
    return reported


def _finding(item: dict[str, Any], by_path: dict[str, Path]) -> Finding:
    rule = str(item.get("rule_name") or "unknown")
    file = str(item.get("file", ""))
    help_text = str(item.get("help") or "").strip().rstrip(".")
    hint = f"{help_text}; see {DOCS}{rule}" if help_text else f"see {DOCS}{rule}"
    return Finding(
        code=f"squawk.{rule}",
        path=by_path.get(file, Path(file).resolve()),
        line=int(item.get("line", 0)) + 1,
        column=int(item.get("column", 0)) + 1,
        message=str(item.get("message", "")).strip(),
        hint=hint,
        source="squawk",
    )
