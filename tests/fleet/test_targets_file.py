"""The targets file: read with tomllib, every bad file refused in one line naming its key
(exit 2) before anything is claimed or written; `${VAR}` expanded from the environment."""

from __future__ import annotations

from pathlib import Path

import pytest

from queueguard.errors import FleetFileError
from queueguard.fleet import targets, waves
from queueguard.fleet.targets import Target, Wave

PATH = Path("/fleet/targets.toml")
DSN = "postgresql://app@db1/tenant_a"
#: the smallest fleet: one target
ONE = f'[[targets]]\ndsn = "{DSN}"\n'


def parse(text: str, environ: dict[str, str] | None = None) -> targets.FleetFile:
    return targets.parse(text, PATH, 4, environ or {})


def test_a_full_file_is_read_with_its_defaults() -> None:
    found = parse(
        f"""
migrations = "db/migrations"
format = "sqldir"

[[targets]]
dsn = "{DSN}"
labels = {{ tier = "canary" }}

[[targets]]
name = "b"
dsn = "postgresql://app:${{PW}}@db1/shared"
schema = "tenant_b"

[[discover]]
dsn = "postgresql://app@db1/postgres"
databases = "tenant\\\\_%"
labels = {{ server = "db1" }}

[[waves]]
name = "canary"
match = {{ tier = "canary" }}
parallel = 1

[[waves]]
name = "rest"
on_error = "isolate"
max_failures = 3
""",
        {"PW": "s3cret"},
    )
    assert found.migrations == Path("/fleet/db/migrations")
    assert found.format == "sqldir"
    assert [t.name for t in found.targets] == ["tenant_a", "b"]
    assert found.targets[1].schema == "tenant_b"
    assert "s3cret" in found.targets[1].dsn and "s3cret" not in found.targets[1].redacted
    assert found.discover[0].databases == "tenant\\_%"
    assert found.waves[0] == Wave("canary", {"tier": "canary"}, 1, "stop", None)
    assert found.waves[1] == Wave("rest", {}, 4, "isolate", 3)


def test_no_waves_is_one_wave_at_the_default_parallel_that_stops() -> None:
    found = parse(f'[[targets]]\ndsn = "{DSN}"\n')
    assert found.waves == (Wave("all", {}, 4, "stop", None),)


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("[[targets]\n", "not TOML"),
        ('migrations = "m"\n', "neither [[targets]] nor [[discover]]"),
        ('colour = "red"\n' + ONE, "colour: unknown key"),
        (ONE + "port = 1\n", "targets[0].port: unknown key"),
        ('[[targets]]\ndsn = "host=a port=\'x"\n', "targets[0].dsn: not a connection string"),
        ("[[targets]]\nname = 'x'\n", "targets[0].dsn: missing"),
        ('[[targets]]\ndsn = "postgresql://a:${NOPE}@h/d"\n', "targets[0].dsn: ${NOPE} is not set"),
        (
            ONE + ONE,
            "targets[1].name: 'tenant_a' again",
        ),
        (
            ONE + "labels = { n = 1 }\n",
            "targets[0].labels: a table of strings",
        ),
        (
            ONE + '[[waves]]\nname = "a"\n[[waves]]\nname = "b"\n'
            '[[waves]]\nname = "c"\non_error = "retry"\n',
            "waves[2].on_error: stop or isolate expected",
        ),
        (
            ONE + '[[waves]]\nname = "a"\n[[waves]]\nname = "a"\n',
            "waves[1].name: 'a' again",
        ),
        (ONE + '[[waves]]\nname = "a"\nparallel = 0\n', "waves[0].parallel"),
        (
            ONE + '[[waves]]\nname = "a"\nmax_failures = 2\n',
            "waves[0].max_failures: only with",
        ),
        (ONE + "[[waves]]\nmatch = {}\n", "waves[0].name: missing"),
        (f'[[discover]]\ndsn = "{DSN}"\n', "discover[0]: exactly one of"),
        (
            f'[[discover]]\ndsn = "{DSN}"\ndatabases = "a%"\nschemas = "b%"\n',
            "discover[0]: exactly one of",
        ),
    ],
)
def test_a_bad_file_is_refused_naming_its_key(text: str, key: str) -> None:
    with pytest.raises(FleetFileError) as refused:
        parse(text)
    message = str(refused.value)
    assert message.startswith(f"{PATH}: ") and key in message, message
    assert "\n" not in message
    assert refused.value.exit_code == 2


def test_targets_go_to_the_first_wave_they_match_and_every_wave_needs_one() -> None:
    a = Target("a", DSN, None, {"tier": "canary"})
    b = Target("b", DSN, None, {})
    canary = Wave("canary", {"tier": "canary"}, 1, "stop", None)
    rest = Wave("rest", {}, 4, "stop", None)
    assert waves.assign([a, b], [canary, rest]) == [[a], [b]]
    with pytest.raises(FleetFileError, match="target 'b' joins no wave"):
        waves.assign([a, b], [canary])
    with pytest.raises(FleetFileError, match=r"waves\[0\].match: wave 'canary' selects no target"):
        waves.assign([b], [canary, rest])
    with pytest.raises(FleetFileError, match="'a' again"):
        waves.assign([a, a], [rest])
