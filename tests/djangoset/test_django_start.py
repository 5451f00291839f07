"""The runner started first thing by the command line (`sets.django_start`): which command
lines start it, that the command adopts it (one runner, not two), and what an interpreter
without Django is told now that no separate probe runs."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from queueguard.errors import UsageError
from queueguard.sets import django as django_format
from queueguard.sets import django_start
from queueguard.sets import load as load_set
from queueguard.sets.django_start import Options, requested


def test_the_command_lines_that_name_a_django_project(
    shop: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert requested(["plan", "--migrations", str(shop), "--dsn", "x"]) == (
        shop.resolve(),
        Options(),
    )
    assert requested(
        ["upgrade", f"--migrations={shop}", "--settings", "s.t", "--python", "/p", "--database",
         "other", "--allow-custom-migrate"]
    ) == (shop.resolve(), Options("/p", "s.t", "other", True))  # fmt: skip
    # another format said, another command, help, a value missing: left to the command
    assert requested(["plan", "--migrations", str(shop), "--format", "sqldir"]) is None
    assert requested(["db", "start"]) is None
    assert requested(["plan", "--migrations", str(shop), "--help"]) is None
    assert requested(["plan", "--migrations"]) is None
    assert requested([]) is None
    # a folder that another format may claim is not guessed at
    (shop / "alembic.ini").write_text("[alembic]\nscript_location = .\n")
    (shop / "env.py").write_text("")
    (shop / "versions").mkdir()
    assert requested(["plan", "--migrations", str(shop)]) is None
    assert requested(["plan", "--migrations", str(shop), "--format", "django"]) is not None
    # --format django without a folder: the project of the working directory
    monkeypatch.chdir(tmp_path)
    assert requested(["status", "--format", "django"]) == (tmp_path.resolve(), Options())


def test_the_runner_started_early_is_the_one_the_command_uses(shop: Path) -> None:
    django_start.early(["plan", "--migrations", str(shop)])
    (started,) = django_start._EARLY.values()
    mset = load_set(shop, "django")
    graph = mset.runner
    assert graph.runner._process is started.popen  # adopted, not a second start
    assert django_start._EARLY == {}
    assert graph.graph()["migrations"]  # and it serves the set


def test_an_interpreter_without_django_is_a_usage_error(shop: Path, tmp_path: Path) -> None:
    # our interpreter without its site-packages: no Django there
    bare = tmp_path / "python-bare"
    bare.write_text(f'#!/bin/sh\nexec {os.path.realpath(sys.executable)} -S "$@"\n')
    bare.chmod(0o755)
    with pytest.raises(UsageError, match=r"Django does not import in .*python-bare \(--python"):
        django_format.load(shop, Options(python=str(bare)))


def test_a_runner_no_command_took_ends_with_the_command(
    shop: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from queueguard.cli import main

    started: list[django_start.Process] = []

    def spawn(proj: django_start.Project) -> django_start.Process:
        started.append(django_start_spawn(proj))
        return started[-1]

    django_start_spawn = django_start.spawn
    monkeypatch.setattr(django_start, "spawn", spawn)
    # a usage error before the set is read: the runner started for it is not left waiting
    assert main(["plan", "--migrations", str(shop), "--sample-rows", "0"]) == 2
    assert len(started) == 1 and django_start._EARLY == {}
    assert started[0].popen.wait(timeout=30) is not None
