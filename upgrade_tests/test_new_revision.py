"""Adding a revision takes exactly the files an author writes (docs/authoring-migrations.md).

A copy of the migration set gains a throwaway revision 005 (an index) and nothing else is
edited: the manifest is regenerated with `queueguard manifest --write`, the golden files of a
copy of the fixtures with the fixture generator, and then `upgrade`, `status`, `preflight`,
`lint`, the compatibility matrix and `verify` all pick 005 up through `--migrations DIR`.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from queueguard import cli, revisions
from queueguard.queue_schema import compat
from queueguard.resources import fixtures_dir, migrations_dir

REVISION_005 = '''"""005 — a throwaway revision: an index on tasks.created_at."""

from queueguard.queue_schema import steps

revision = "005"
down_revision = "004"
branch_labels = None
depends_on = None

locks = {"tasks": "SHARE"}  # CREATE INDEX blocks writes (not reads) while it builds


def upgrade() -> None:
    steps.apply(revision)


def downgrade() -> None:
    steps.refuse_downgrade(revision)
'''
STEP_005 = "CREATE INDEX tasks_created_at ON tasks (created_at);\n"


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    """Exit code and stdout (the JSON document, with --json); stderr is echoed on failure."""
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    print(err, file=sys.stderr)  # shown when the test fails
    return code, out


@pytest.fixture(scope="module")
def migrations_005(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The packaged set plus the two files an author writes for 005, manifest regenerated."""
    root = tmp_path_factory.mktemp("set") / "migrations"
    shutil.copytree(migrations_dir(), root, ignore=shutil.ignore_patterns("__pycache__"))
    (root / "versions" / "005.py").write_text(REVISION_005)
    (root / "sql" / "005").mkdir()
    (root / "sql" / "005" / "01_index.sql").write_text(STEP_005)
    assert cli.main(["manifest", "--write", "--migrations", str(root)]) == 0
    return root


def test_the_revision_facts_come_from_the_script_directory(migrations_005: Path) -> None:
    found = revisions.load(migrations_005)
    assert found.ids == ("001", "002", "003", "004", "005")
    assert found.head.id == "005" and found.previous("005") == "004"
    # facts not declared are inherited: the protocol and the ledger from 004
    assert (found.head.protocol, found.head.ledger, found.head.fences_older_hosts) == (
        4,
        True,
        False,
    )
    assert revisions.packaged().head.id == "004"  # the packaged set is untouched


def test_manifest_checks_the_copy_and_names_an_edit(
    capsys: pytest.CaptureFixture[str], migrations_005: Path, tmp_path: Path
) -> None:
    code, out = _run(capsys, "manifest", "--migrations", str(migrations_005))
    assert (code, "5 revisions (001…005)" in out) == (0, True), out
    edited = tmp_path / "migrations"
    shutil.copytree(migrations_005, edited)
    (edited / "sql" / "005" / "01_index.sql").write_text(STEP_005 + "-- edited\n")
    code, out = _run(capsys, "manifest", "--migrations", str(edited), "--json")
    doc = json.loads(out)
    assert code == 1 and doc["ok"] is False
    assert "sql/005/01_index.sql (edited)" in doc["problems"][0]


def test_upgrade_status_and_preflight_pick_up_005(
    capsys: pytest.CaptureFixture[str],
    migrations_005: Path,
    queueguard_database: Callable[..., str],
) -> None:
    dsn = queueguard_database(fixture="v0.3")
    code, out = _run(capsys, "upgrade", "--dsn", dsn, "--to", "004", "--json")
    assert code == 0 and json.loads(out)["after"] == "004"

    code, out = _run(
        capsys, "preflight", "--dsn", dsn, "--migrations", str(migrations_005), "--json"
    )
    doc = json.loads(out)
    assert code == 0 and doc["target"] == "005"
    pending = next(f for f in doc["findings"] if f["code"] == "schema.pending")
    assert pending["samples"] == ["005"]

    code, out = _run(capsys, "status", "--dsn", dsn, "--migrations", str(migrations_005), "--json")
    assert (json.loads(out)["revision"], json.loads(out)["head"]) == ("004", "005")

    code, out = _run(capsys, "upgrade", "--dsn", dsn, "--migrations", str(migrations_005), "--json")
    report = json.loads(out)
    assert code == 0 and (report["applied"], report["after"]) == (["005"], "005"), out
    assert report["queues_fenced"] == 0  # 005 does not fence: no range_id moved

    code, out = _run(capsys, "status", "--dsn", dsn, "--migrations", str(migrations_005), "--json")
    doc = json.loads(out)
    assert (doc["revision"], doc["head"], doc["drift"]) == ("005", "005", [])

    code, out = _run(
        capsys, "preflight", "--dsn", dsn, "--migrations", str(migrations_005), "--json"
    )
    assert [f["code"] for f in json.loads(out)["findings"]] == ["schema.at_head"]
    # the packaged set does not know 005: every command refuses instead of guessing
    assert cli.main(["upgrade", "--dsn", dsn]) == 1
    assert "'005', which this release does not know (001…004)" in capsys.readouterr().err


def test_lint_checks_005_as_an_unreleased_revision(
    capsys: pytest.CaptureFixture[str], migrations_005: Path
) -> None:
    code, out = _run(capsys, "lint", "--migrations", str(migrations_005), "--json")
    located = {(Path(f["file"]).parts[-3:], f["code"]) for f in json.loads(out)["findings"]}
    # A plain CREATE INDEX blocks writes for the whole build: the gate says so, at 005.
    assert (("sql", "005", "01_index.sql"), "squawk.require-concurrent-index-creation") in located
    assert code == 1


def test_the_compatibility_matrix_includes_005(
    migrations_005: Path, queueguard_server: str
) -> None:
    matrix = compat.matrix_on_server(queueguard_server, migrations=revisions.load(migrations_005))
    assert matrix.revisions == ["001", "002", "003", "004", "005"]
    assert (matrix.head, matrix.head_protocol) == ("005", 4)
    assert matrix.violations() == []


@pytest.mark.slow
def test_verify_passes_on_005_after_regenerating_the_golden_files(
    capsys: pytest.CaptureFixture[str], migrations_005: Path, tmp_path: Path
) -> None:
    fixtures = tmp_path / "fixtures"
    shutil.copytree(fixtures_dir(), fixtures, ignore=shutil.ignore_patterns("__pycache__"))
    generator = [sys.executable, "-m", "queueguard.queue_schema.fixturegen"]
    where = ["--fixtures", str(fixtures), "--migrations", str(migrations_005)]
    subprocess.run([*generator, "--write", *where], check=True, capture_output=True)
    code, out = _run(
        capsys,
        "verify",
        "--migrations",
        str(migrations_005),
        "--fixtures",
        str(fixtures),
        "--json",
    )
    doc = json.loads(out)
    assert code == 0, out
    assert {r["fixture"]: r["ok"] for r in doc["fixtures"]} == {
        "v0.1": True,
        "v0.2": True,
        "v0.3": True,
    }
    upgrade_checks = [c for r in doc["fixtures"] for c in r["checks"] if c["name"] == "upgrade"]
    assert all("-> 005" in c["detail"] for c in upgrade_checks)
