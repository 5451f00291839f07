"""Scratch copies of the migration set: the real one is never touched.

One folder per run holds the baseline copy; each mutant gets its own copy of it, with the
mutated file written and the copy's manifest regenerated (a deliberate edit: tamper
detection is not what a mutant tests).
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path

from queueguard.queue_schema import manifest

_IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc")


def materialise(source: Path, dest: Path, files: Mapping[str, str]) -> Path:
    """A copy of the migration set at `source` in `dest`, with `files` (paths relative to
    the set, e.g. `sql/004/02_directives.sql`) replaced and the manifest regenerated."""
    shutil.copytree(source, dest, ignore=_IGNORE)
    for relative, text in files.items():
        target = dest / relative
        if not target.is_file():
            raise FileNotFoundError(f"{relative} is not a file of the migration set {source}")
        target.write_text(text, encoding="utf-8")
    if files:
        manifest.write(dest)
    return dest


class Workspace:
    """The run's scratch folder: `baseline` (an unmodified copy) and one folder per job."""

    def __init__(self, source: Path) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="queueguard-mutate-"))
        self.baseline = materialise(source, self.folder / "baseline", {})

    def job_folder(self, key: str) -> Path:
        return self.folder / "jobs" / key

    def discard(self, key: str) -> None:
        shutil.rmtree(self.job_folder(key), ignore_errors=True)

    def close(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)

    def __enter__(self) -> Workspace:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
