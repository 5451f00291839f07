"""The tutorial's commands run exactly as documented, and print what the docs show."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

TUTORIAL = Path(__file__).parents[2] / "docs" / "tutorial.md"
_BLOCK = re.compile(r"```console\n(.*?)```", re.DOTALL)
_EXIT = re.compile(r"\s+#\s*exit\s+(\d+)\s*$")


def blocks(text: str) -> list[tuple[str, int, list[str]]]:
    """(command, expected exit code, expected output lines) per console block."""
    result = []
    for body in _BLOCK.findall(text):
        lines = body.rstrip("\n").split("\n")
        command = lines[0].removeprefix("$ ")
        code = 0
        match = _EXIT.search(command)
        if match:
            code, command = int(match.group(1)), command[: match.start()]
        result.append((command, code, lines[1:]))
    return result


def matches(expected: list[str], output: str) -> str | None:
    """None if every expected line appears in order (`...` skips; a trailing ` ...` on a
    line means 'starts with'); else the first line that did not."""
    got = output.splitlines()
    pos = 0
    for want in expected:
        if want.strip() == "...":
            continue
        prefix = want[:-4] if want.endswith(" ...") else None
        while pos < len(got) and not (
            got[pos].startswith(prefix) if prefix is not None else got[pos] == want
        ):
            pos += 1
        if pos == len(got):
            return want
        pos += 1
    return None


@pytest.mark.slow
def test_tutorial_commands(queueguard_dsn: str, tmp_path: Path) -> None:
    steps = blocks(TUTORIAL.read_text())
    assert len(steps) >= 8
    bindir = str(Path(sys.executable).parent)
    env = {**os.environ, "DSN": queueguard_dsn, "PATH": bindir + os.pathsep + os.environ["PATH"]}
    env.pop("QUEUEGUARD_DSN", None)
    for command, code, expected in steps:
        run = subprocess.run(
            ["bash", "-c", command],
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp_path,
            timeout=300,
            check=False,
        )
        output = run.stdout + run.stderr
        assert run.returncode == code, f"{command!r} exited {run.returncode}:\n{output}"
        missing = matches(expected, output)
        assert missing is None, f"{command!r}: {missing!r} not in output:\n{output}"


@pytest.mark.parametrize(
    ("expected", "output", "ok"),
    [
        (["a", "...", "c"], "a\nb\nc", True),
        (["c", "a"], "a\nc", False),
        (["x ..."], "x yz", True),
        (["x"], "x yz", False),
    ],
)
def test_matcher(expected: list[str], output: str, ok: bool) -> None:
    assert (matches(expected, output) is None) is ok
