"""The pytest plugin on small example projects (pytester), and where servers come from."""

from __future__ import annotations

import pytest

from queueguard.cli import main
from queueguard.errors import EmbeddedServerError, UsageError
from queueguard.pg import scratch

pytest_plugins = ["pytester"]

EXAMPLE = """
from queueguard.pg.connect import connection
from queueguard.core.keys import PhysicalQueue


def test_scratch_database_is_empty(queueguard_dsn):
    with connection(queueguard_dsn) as conn:
        assert conn.execute("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'"
                            ).fetchone() == (0,)


def test_old_and_upgraded(queueguard_old_db):
    with connection(queueguard_old_db) as conn:
        assert conn.execute("SELECT version_num FROM queueguard_version").fetchone() == ("002",)


def test_runtime_serves_upgraded_db(queueguard_runtime, queueguard_upgraded_db):
    mgr = queueguard_runtime.manager(PhysicalQueue("default", "orders", "workflow", 0))
    assert [t.task_id for t in mgr.read()][:1] == [1]
"""

CONFTEST = """
import pytest


@pytest.fixture
def queueguard_fixture_name():
    return "v0.2"
"""


def test_plugin_is_inert_until_enabled(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_inert="def test_x(queueguard_dsn):\n    pass\n")
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*fixture 'queueguard_dsn' not found*"])


def test_plugin_fixtures_configured_by_override(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nqueueguard = true\n")
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_example=EXAMPLE)
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=3)


def test_plugin_enabled_by_flag(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_flag="def test_x(queueguard_dsn):\n    assert 'dbname=' in queueguard_dsn\n"
    )
    result = pytester.runpytest("-p", "no:cacheprovider", "--queueguard")
    result.assert_outcomes(passed=1)


def _docker_engine() -> bool:
    import subprocess

    try:
        return subprocess.run(["docker", "info"], capture_output=True, timeout=20).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def test_docker_backend() -> None:
    """Real where an engine runs; elsewhere one clear line, never a stack trace."""
    if _docker_engine():
        from queueguard.pg.connect import connection

        with connection(scratch.server_dsn("docker:16")) as conn:
            assert conn.execute("SHOW server_version").fetchone()[0].startswith("16")
        return
    with pytest.raises(EmbeddedServerError) as err:
        scratch.server_dsn("docker:16")
    message = str(err.value)
    assert message.startswith("docker:16: no usable Docker engine")
    assert "\n" not in message


def test_docker_backend_through_the_cli_is_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    if _docker_engine():
        return  # covered for real by test_docker_backend
    monkeypatch.setenv("QUEUEGUARD_PG", "docker:16")
    assert main(["verify"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no usable Docker engine" in err[0]


def test_unknown_backend_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="expected embedded, system"):
        scratch.server_dsn("oracle")
