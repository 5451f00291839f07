"""Every command's text output reads as a tool's, not as Python: run on a v0.3 database, a head
database and a set of another format (the test Temporal set at 0.2), no output holds a
Python repr (`{'…'}`, `['…']`, `[]`, `None`, `True`, `False`, a one-element tuple, an
object's address) on stdout or stderr.

The databases are made once for the module; `upgrade` runs on copies of them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest

from queueguard.cli import main
from queueguard.pg import scratch, tools
from queueguard.queue_schema import golden
from queueguard.queue_schema.runner import upgrade

ROOT = Path(__file__).resolve().parents[2]
TEMPORAL = str(ROOT / "tests/sets/data/temporal")
KENNELS = ROOT / "tests/engine/fixtures/0.2--two-kennels.sql"
INVARIANTS = str(ROOT / "tests/engine/invariants.sql")
REPR = re.compile(
    r"\{'|\['|\[\]|(?<![\w)\]])\(\)|\bNone\b|\bTrue\b|\bFalse\b|object at 0x|\(\d+,\)"
)

Databases = dict[str, str]


@pytest.fixture(scope="module")
def dbs(pg_admin_dsn: str) -> Iterator[Callable[[str], str]]:
    """`dbs(name)`: v03, head or kennels (the Temporal set at 0.2), or a fresh copy of one
    (`copy-v03`), made on first use."""
    with scratch.ScratchDatabases(pg_admin_dsn, prefix="qgtext") as databases:
        made: Databases = {}

        def get(name: str) -> str:
            if name.startswith("copy-"):
                source = scratch.dbname_of(get(name.removeprefix("copy-")))
                return databases.create(template=source)
            if name not in made:
                dsn = databases.create()
                if name == "v03":
                    golden.load(golden.get("v0.3"), dsn)
                elif name == "head":
                    upgrade(dsn, progress=False)
                else:
                    args = ["-v", "ON_ERROR_STOP=1", "-q", "-f", str(KENNELS)]
                    assert tools.run("psql", dsn, args).returncode == 0
                    with psycopg.connect(dsn, autocommit=True) as conn:
                        conn.execute(
                            "UPDATE public.schema_version SET db_name = current_database()"
                        )
                made[name] = dsn
            return made[name]

        yield get


T = ("--migrations", TEMPORAL)
#: (id, argv; `{name}` is replaced by that database's DSN)
COMMANDS: list[tuple[str, tuple[str, ...]]] = [
    ("status-v03", ("status", "--dsn", "{v03}")),
    ("status-head", ("status", "--dsn", "{head}")),
    ("status-set", ("status", *T, "--dsn", "{kennels}")),
    ("inspect-v03", ("inspect", "order-1", "--dsn", "{v03}")),
    ("preflight-v03", ("preflight", "--dsn", "{v03}")),
    ("preflight-head", ("preflight", "--dsn", "{head}")),
    ("plan-v03", ("plan", "--dsn", "{v03}", "--max-lock", "1ms")),
    ("plan-head", ("plan", "--dsn", "{head}")),
    ("plan-set", ("plan", *T, "--dsn", "{kennels}", "--max-lock", "1ms")),
    ("rehearse-v03", ("rehearse", "--dsn", "{v03}")),
    ("rehearse-set", ("rehearse", *T, "--dsn", "{kennels}", "--invariants", INVARIANTS)),
    ("upgrade-v03", ("upgrade", "--dsn", "{copy-v03}")),
    ("upgrade-head", ("upgrade", "--dsn", "{head}")),
    ("upgrade-set", ("upgrade", *T, "--dsn", "{copy-kennels}")),
    ("lint", ("lint",)),
    ("lint-set", ("lint", TEMPORAL)),
    ("verify-v0.1", ("verify", "--fixture", "v0.1")),
    (
        "verify-set",
        ("verify", *T, "--fixtures", str(KENNELS.parent), "--invariants", INVARIANTS),
    ),
    ("fixtures", ("fixtures", "list")),
    ("manifest", ("manifest",)),
    ("mutate-list", ("mutate", "--list")),
    ("snapshot", ("snapshot", "import", str(ROOT / "fixtures/snapshots/v3_golden.json"))),
    ("demo", ("demo", "--dsn", "{head}")),
]


#: a whole verify run takes tens of seconds: the slow tier
_PARAMS = [
    pytest.param(argv, id=name, marks=[pytest.mark.slow] if name == "verify-v0.1" else [])
    for name, argv in COMMANDS
]


@pytest.mark.parametrize("argv", _PARAMS)
def test_text_output_holds_no_python_repr(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    dbs: Callable[[str], str],
    argv: tuple[str, ...],
) -> None:
    monkeypatch.chdir(ROOT)
    args = [re.sub(r"^\{(.+)\}$", lambda m: dbs(m[1]), a) for a in argv]
    code = main(args)
    out, err = capsys.readouterr()
    assert code in (0, 1), err
    assert out or err
    for stream, text in (("stdout", out), ("stderr", err)):
        leftovers = [
            line for line in text.splitlines() if REPR.search(line) and "INFO  [alembic" not in line
        ]
        assert not leftovers, f"{stream} of {' '.join(argv)}:\n" + "\n".join(leftovers)
