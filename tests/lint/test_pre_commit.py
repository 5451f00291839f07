"""The pre-commit hook (`.pre-commit-hooks.yaml`), run by the real pre-commit: `pre-commit
try-repo` installs this repository's committed HEAD (or its work tree's changes) as the hook's
Python environment, then runs `queueguard lint` on the files given, in a scratch git
repository holding a plain SQL set. An index built without CONCURRENTLY on a table an earlier
revision created fails the hook, naming the finding; a table created alone passes.

Installing the environment is pip's work (queueguard's dependencies, from the package index
pip is configured with): once per run of this module, so the module is marked slow.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
CREATE = "CREATE TABLE u (id bigint PRIMARY KEY, a text);\n"
INDEX = "CREATE INDEX u_a_idx ON u (a);\n"
PRE_COMMIT = (sys.executable, "-m", "pre_commit")


def test_the_manifest_declares_the_hook() -> None:
    (hook,) = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text(encoding="utf-8"))
    assert (hook["id"], hook["language"], hook["entry"]) == (
        "queueguard-lint",
        "python",
        "queueguard lint",
    )
    # the squawk it runs is the pinned one (tests/lint/test_lint_cli.py pins the extras)
    from queueguard.lint.squawk import SQUAWK_VERSION

    assert hook["additional_dependencies"] == [f"squawk-cli=={SQUAWK_VERSION}"]


def _git(repo: Path, *argv: str) -> None:
    subprocess.run(["git", *argv], cwd=repo, check=True, capture_output=True)


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_pre_commit_try_repo_fails_on_a_blocking_index_and_passes_a_new_table(
    tmp_path: Path,
) -> None:
    project = tmp_path / "project"
    migrations = project / "db" / "migrations"
    migrations.mkdir(parents=True)
    (migrations / "001_u.sql").write_text(CREATE)
    (migrations / "002_u_a_index.sql").write_text(INDEX)
    _git(project, "init", "-q")
    env = {**os.environ, "PRE_COMMIT_HOME": str(tmp_path / "pre-commit-home")}
    env.pop("QUEUEGUARD_SQUAWK", None)  # the hook's own squawk, from its environment

    def try_repo(migration: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*PRE_COMMIT, "try-repo", str(ROOT), "queueguard-lint", "--files", migration],
            cwd=project,
            env=env,
            capture_output=True,
            text=True,
            timeout=840,
        )

    failed = try_repo("db/migrations/002_u_a_index.sql")
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert "queueguard lint" in failed.stdout and "Failed" in failed.stdout
    assert "squawk.require-concurrent-index-creation" in failed.stdout
    assert "db/migrations/002_u_a_index.sql:1" in failed.stdout

    passed = try_repo("db/migrations/001_u.sql")
    assert passed.returncode == 0, passed.stdout + passed.stderr
    assert "Passed" in passed.stdout
