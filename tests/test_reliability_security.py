"""Reliability, CI scale: least privilege and password hygiene (docs/reliability.md 9).

`python -m bench.chaos.least_privilege --quick`: owner, read-only and DML-only roles with
passwords on a private scratch server listening on 127.0.0.1; every check of the full run,
fewer DSN forms.
"""

from __future__ import annotations

import pytest

from bench.chaos import least_privilege, privileges
from bench.common.databases import create_database
from bench.common.servers import ScratchServer


@pytest.mark.slow
def test_least_privilege_and_no_password_in_any_output() -> None:
    result = least_privilege.run(quick=True, log=print)
    print(f"{len(result.checks)} checks, {result.cli_runs} CLI runs, {result.api_calls} API calls")
    least_privilege.check(result)
    assert result.cli_runs >= 30 and result.api_calls >= 20


@pytest.mark.slow
def test_the_leak_search_finds_a_password_that_is_printed() -> None:
    """Positive control: a command that echoes its input (an unknown fixture name) is
    caught, and the finding does not repeat the password."""
    with ScratchServer(tcp=True) as server:
        roles = privileges.Roles(server)
        create_database(server.admin_dsn(), "lp_head", owner="qg_owner")
        result = privileges.Result()
        secret = roles.passwords["qg_reader"]
        dsn = roles.url("qg_owner", "lp_head")
        done = privileges.cli(["fixtures", "load", secret, "--dsn", dsn], result, roles)
        assert done.returncode == 2 and "unknown fixture" in done.stderr
        assert result.leaks and "password in stderr" in result.leaks[0]
        assert "<dsn>" in result.leaks[0] and secret not in result.leaks[0]
