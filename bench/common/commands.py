"""Child processes of the benchmarks, and the command lines the generated docs show.

A child runs a bench module with this interpreter (`python -m bench.x`) from the repository
root, so `bench` is importable there as it is here. What the docs show is the reproduction
command a reader types (`python -m bench.x --flag value`): never this machine's interpreter
path.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: the `queueguard` console script installed beside this interpreter
QUEUEGUARD = str(Path(sys.executable).with_name("queueguard"))


def module_argv(module: str, *args: str) -> list[str]:
    """argv running `module` (e.g. `bench.common.host`) with this interpreter; start it with
    `cwd=ROOT`."""
    return [sys.executable, "-m", module, *args]


def shown(module: str, *args: str) -> str:
    """The command a reader types to reproduce a run: `python -m bench.runtime --tasks 5`."""
    return shlex.join(["python", "-m", module, *args])
