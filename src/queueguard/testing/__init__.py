"""The queueguard pytest plugin (entry point `pytest11`), inert until enabled.

Enable it with `queueguard = true` in the pytest ini section, or `-p queueguard.testing`
together with `--queueguard`. It then provides, like pytest-alembic's fixtures, and each
configurable by overriding the fixture of the same name:

- `queueguard_server`: admin DSN of the scratch server (`QUEUEGUARD_PG`, embedded default);
- `queueguard_dsn`: a fresh empty database, dropped after the test;
- `queueguard_database`: a factory: `queueguard_database(fixture="v0.3")` loads a golden
  fixture at its old revision, `queueguard_database(revision="003")` migrates an empty one;
- `queueguard_fixture_name`: which golden fixture `queueguard_old_db` loads (default v0.3);
- `queueguard_old_db` / `queueguard_upgraded_db`: that fixture before / after the upgrade;
- `queueguard_runtime`: a Matching host bound to `queueguard_upgraded_db`.
"""

from __future__ import annotations

import pytest

ENABLE_INI = "queueguard"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini(ENABLE_INI, "enable the queueguard fixtures", type="bool", default=False)
    parser.addoption("--queueguard", action="store_true", help="enable the queueguard fixtures")


def pytest_configure(config: pytest.Config) -> None:
    if config.getini(ENABLE_INI) or config.getoption("--queueguard"):
        from queueguard.testing import fixtures

        config.pluginmanager.register(fixtures, "queueguard-fixtures")
