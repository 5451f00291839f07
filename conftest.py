"""Settings shared by every test directory."""

import pytest
from hypothesis import HealthCheck, settings

# Example counts stay as each test sets them; generation speed is not what these tests judge,
# and a loaded 2-core CI machine must not turn a slow draw into a failure.
settings.register_profile("queueguard", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("queueguard")


# --- the slow tier ---------------------------------------------------------------------------
# `pytest` runs the fast tier (the README's test command: minutes on a 2-core machine); the
# tests marked `slow` — chaos, mutation, whole-verify and kill-and-rerun runs, each tens of
# seconds — run with `--slow` (all) or `-m slow` (those alone); `.ci/run` runs both tiers. A
# test named on the command line (`file::test`) runs whatever its mark.


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--slow", action="store_true", help="also run the tests marked slow (CI runs them)"
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    named = any("::" in str(arg) for arg in config.args)
    if config.getoption("--slow") or config.option.markexpr or named:
        return
    slow = [item for item in items if item.get_closest_marker("slow") is not None]
    if slow:
        config.hook.pytest_deselected(items=slow)
        items[:] = [item for item in items if item.get_closest_marker("slow") is None]
