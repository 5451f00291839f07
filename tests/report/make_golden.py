"""Writes tests/report/golden/: each command's JSON document from a real run, and the
pull-request comment `--output markdown` renders from that document.

    python tests/report/make_golden.py            # run the commands, write documents and comments
    python tests/report/make_golden.py --check    # re-render the stored documents; exit 1 on a diff
    python tests/report/make_golden.py --render   # re-render the comments (a renderer changed)
    python tests/report/make_golden.py plan-alembic   # only these cases

Each case runs one command with `--output json` on the embedded server (scratch databases,
dropped afterwards), from the repository's root, so the document names files as a checkout
does. The absolute path of the checkout, which two documents keep (`verify --migrations`'s
`migrations`, `lint --migrations`'s `root`), is written as `.`: the comment never shows it (a test
holds the renderers to that). The comment is then rendered from the stored document alone,
as `--output markdown` renders it, so `--check` needs no database.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
GOLDEN = HERE / "golden"
DATA = HERE / "data"
TEMPORAL = "tests/sets/data/temporal"
ALEMBIC = "tests/sets/data/alembic_plain"
ACCOUNTS = "tests/report/data/accounts"
TWO_KENNELS = REPO / "tests/engine/fixtures/0.2--two-kennels.sql"
LINT_BAD = [
    "tests/lint/lint_corpus/golden/lock_order/bad.sql",
    "tests/lint/lint_corpus/golden/squawk/bad.sql",
    "tests/lint/lint_corpus/golden/silences/bad.sql",
]

#: case -> (command, how to make its arguments from the scratch databases)
Argv = Callable[["Targets"], list[str]]
FRESH = "tests/sets/data/temporal_fresh.sql"
FIXTURES = "tests/engine/fixtures"
INVARIANTS = "tests/engine/invariants.sql"
CASES: dict[str, tuple[str, Argv]] = {
    "plan-temporal": (
        "plan",
        lambda t: [
            *("--migrations", TEMPORAL, "--dsn", t.kennels()),
            *t.scratch,
            "--max-lock",
            "1ms",
        ],
    ),
    "plan-alembic": ("plan", lambda t: ["--migrations", ALEMBIC, "--dsn", t.empty(), *t.scratch]),
    "plan-sqldir": (
        "plan",
        lambda t: [
            *("--migrations", ACCOUNTS, "--dsn", t.accounts(), *t.scratch),
            *("--max-lock", "5ms", "--sample-rows", "500"),
        ],
    ),
    "verify-own": ("verify", lambda t: ["--dsn", t.admin]),
    "verify-temporal": (
        "verify",
        lambda t: [
            *("--migrations", TEMPORAL, "--dsn", t.admin, "--fresh", FRESH),
            *("--fixtures", FIXTURES, "--invariants", INVARIANTS),
        ],
    ),
    "lint-own": ("lint", lambda t: []),
    "lint-findings": ("lint", lambda t: list(LINT_BAD)),
    "lint-temporal": ("lint", lambda t: [TEMPORAL]),
    "rehearse-own": ("rehearse", lambda t: ["--dsn", t.v03()]),
    "rehearse-sqldir": (
        "rehearse",
        lambda t: [
            *("--migrations", ACCOUNTS, "--dsn", t.accounts(), *t.scratch),
            *("--invariants", "tests/report/data/invariants.sql"),
        ],
    ),
}


class Targets:
    """The databases the cases run against, each made when first asked for."""

    def __init__(self, databases: object, admin: str) -> None:
        self.databases = databases
        self.admin = admin
        self.scratch = ("--scratch-dsn", admin)

    def empty(self) -> str:
        return str(self.databases.create())  # type: ignore[attr-defined]

    def kennels(self) -> str:
        """The test Temporal set at 0.2 with rows (its verify fixture)."""
        from queueguard.pg import tools

        dsn = self.empty()
        done = tools.run("psql", dsn, ["-v", "ON_ERROR_STOP=1", "-q", "-f", str(TWO_KENNELS)])
        assert done.returncode == 0, done.stderr.decode()
        import psycopg

        with psycopg.connect(dsn, autocommit=True) as conn:  # Temporal keys it on the name
            conn.execute("UPDATE schema_version SET db_name = current_database()")
        return dsn

    def accounts(self) -> str:
        import psycopg

        dsn = self.empty()
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute((DATA / "target.sql").read_text())  # type: ignore[arg-type]
        return dsn

    def v03(self) -> str:
        from queueguard.queue_schema import golden

        dsn = self.empty()
        golden.load(golden.get("v0.3"), dsn)
        return dsn


def run(command: str, argv: list[str]) -> dict[str, object]:
    """The JSON document `queueguard COMMAND ARGV --output json` prints (any exit code)."""
    from queueguard.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        main([command, *argv, "--output", "json"])
    text = out.getvalue().replace(str(REPO) + "/", "").replace(str(REPO), ".")
    doc: dict[str, object] = json.loads(text)
    return doc


def render(name: str) -> str:
    from queueguard import report

    command = CASES[name][0]
    return report.comment(command, json.loads((GOLDEN / f"{name}.json").read_text()))


def write(names: list[str]) -> None:
    from queueguard.pg import scratch

    os.chdir(REPO)
    admin = scratch.server_dsn()
    with scratch.ScratchDatabases(admin, prefix="qggolden") as databases:
        targets = Targets(databases, admin)
        for name in names:
            command, argv = CASES[name]
            doc = run(command, argv(targets))
            text = json.dumps(doc, indent=2, ensure_ascii=False) + "\n"
            (GOLDEN / f"{name}.json").write_text(text, encoding="utf-8")
            (GOLDEN / f"{name}.md").write_text(render(name), encoding="utf-8")
            print(f"wrote {name}")


def check(names: list[str]) -> int:
    stale = [n for n in names if (GOLDEN / f"{n}.md").read_text(encoding="utf-8") != render(n)]
    for name in stale:
        print(f"{name}.md differs from what its document renders", file=sys.stderr)
    return 1 if stale else 0


def main(argv: list[str]) -> int:
    names = [a for a in argv if not a.startswith("--")] or list(CASES)
    if "--check" in argv:
        return check(names)
    if "--render" in argv:
        for name in names:
            (GOLDEN / f"{name}.md").write_text(render(name), encoding="utf-8")
        return 0
    write(names)
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    raise SystemExit(main(sys.argv[1:]))
