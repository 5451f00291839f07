"""A set's own code that fails — a data check raising in a revision's upgrade(), a revision
that does not compile, a module the project imports that queueguard's Python lacks — is one
line on stderr, never a traceback: what was raised, the line of the project's file, and the
target's state (exit 1 while revisions ran, exit 2 when the set cannot be loaded)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest
from alembic import command
from alembic.config import Config

from queueguard.cli import main
from queueguard.sets.project_code import said

FIRST = 'revision = "a1"\ndown_revision = None\nfrom alembic import op\n\n\ndef upgrade():\n    op.execute("CREATE TABLE trial (id int)")\n'  # noqa: E501
CHECK = 'revision = "a2"\ndown_revision = "a1"\n\n\ndef upgrade():\n    raise ValueError("Found invalid trial_values records")\n'  # noqa: E501
BROKEN = 'revision = "a2"\ndown_revision = "a1"\n\n\ndef upgrade(:\n    pass\n'


def _project(root: Path, second: str) -> Path:
    command.init(Config(str(root / "alembic.ini")), str(root / "alembic"))
    (root / "alembic" / "versions" / "a1.py").write_text(FIRST)
    (root / "alembic" / "versions" / "a2.py").write_text(second)
    return root


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    # the error is the last line, and no exception escaped as a traceback's last line (an
    # env.py's logging handler left on a closed stream by an earlier test may log its own)
    assert lines[-1].startswith("queueguard: error"), lines
    raised = ("ValueError: Found", "SyntaxError:", "ModuleNotFoundError:")
    assert not any(line.startswith(raised) for line in lines), lines
    return code, lines[-1]


def test_a_failing_revision_is_one_line_naming_its_line_and_what_stays(
    tmp_path: Path, make_db: Callable[..., str], capsys: pytest.CaptureFixture[str]
) -> None:
    root, dsn = _project(tmp_path, CHECK), make_db()
    code, line = _run(capsys, "upgrade", "--migrations", str(root), "--dsn", dsn)
    assert code == 1
    assert "revision a2 failed (ValueError: Found invalid trial_values records" in line
    assert "(at alembic/versions/a2.py:6)" in line and "a1, stay applied" in line
    with psycopg.connect(dsn) as conn:
        assert conn.execute("SELECT version_num FROM alembic_version").fetchall() == [("a1",)]


@pytest.mark.parametrize("command_name", ["status", "plan", "lint", "upgrade"])
def test_a_revision_that_does_not_compile_is_refused_in_one_line(
    tmp_path: Path,
    make_db: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
    command_name: str,
) -> None:
    root, dsn = _project(tmp_path, BROKEN), make_db()
    code, line = _run(capsys, command_name, "--migrations", str(root), "--dsn", dsn)
    assert code == 2
    assert "a revision does not load: SyntaxError" in line
    assert "(at alembic/versions/a2.py:5)" in line


def test_a_module_missing_from_queueguards_python_is_named_with_the_interpreter(
    tmp_path: Path, make_db: Callable[..., str], capsys: pytest.CaptureFixture[str]
) -> None:
    root, dsn = _project(tmp_path, FIRST.replace("a1", "a2")), make_db()
    env = root / "alembic" / "env.py"
    env.write_text(
        env.read_text().replace(
            "from alembic import context\n",
            "from alembic import context\nimport project_models_absent\n",
        )
    )
    code, line = _run(capsys, "status", "--migrations", str(root), "--dsn", dsn)
    assert code == 2
    assert "env.py failed: ModuleNotFoundError: No module named 'project_models_absent'" in line
    assert "does not import: install queueguard into the application's own environment" in line


def test_said_names_the_last_frame_inside_the_project(tmp_path: Path) -> None:
    source = tmp_path / "rev.py"
    source.write_text("def upgrade():\n    raise KeyError('x')\n")
    scope: dict[str, object] = {}
    exec(compile(source.read_text(), str(source), "exec"), scope)
    with pytest.raises(KeyError) as raised:
        scope["upgrade"]()  # type: ignore[operator]
    assert said(raised.value, tmp_path) == "KeyError: 'x' (at rev.py:2)"
    assert said(ValueError(), tmp_path) == "ValueError"
