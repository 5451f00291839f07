"""The argument parser of the `queueguard` command line (one sub-command per handler)."""

from __future__ import annotations

import argparse
from typing import Any

from queueguard import __version__
from queueguard.cli import database_commands, lint_commands, upgrade_commands, verify_commands
from queueguard.cli.fleet_parser import add_fleet
from queueguard.cli.options import LINT_OUTPUTS, add_dsn, add_migrations, add_output

#: The program's --help description (the contract every command module keeps).
DESCRIPTION = """\
`queueguard`: a fenced task-queue runtime on PostgreSQL and the framework that upgrades it.

Each command parses its arguments, calls one function and renders the result. Data goes to
stdout, logs and progress to stderr. Exit codes: 0 ok, 1 findings/refusal/bad input file,
2 usage error or unreachable server.
"""

#: One example per command, shown at the end of its --help.
EXAMPLES = {
    "demo": "queueguard demo --json",
    "status": 'queueguard status --dsn "$DSN"',
    "inspect": 'queueguard inspect order-42 --namespace default --dsn "$DSN"',
    "db": "queueguard db url",
    "upgrade": 'queueguard upgrade --dsn "$DSN" --lock-timeout 2s --retries 5\n'
    "  queueguard upgrade --sql > upgrade.sql\n"
    '  queueguard upgrade --online --dsn "$DSN" --batch-size 2000 --pause 50ms',
    "preflight": 'queueguard preflight --dsn "$DSN" --fail-on warning --json',
    "verify": "queueguard verify --fixture v0.3",
    "fixtures": 'queueguard fixtures load v0.3 --dsn "$DSN"',
    "snapshot": "queueguard snapshot import backup.json          # validate only\n"
    '  queueguard snapshot import backup.json --dsn "$DSN"',
    "plan": 'queueguard plan --migrations ./schema/versioned --dsn "$DSN" --max-lock 2s\n'
    '  queueguard plan --migrations ./schema/versioned --dsn "$DSN" --output markdown > plan.md',
    "rehearse": 'queueguard rehearse --dsn "$PROD_DSN" --scratch-dsn "$SCRATCH_DSN"',
    "lint": "queueguard lint migrations/ --json\n"
    "  queueguard lint --migrations ./schema/versioned --output github",
    "manifest": "queueguard manifest --write --migrations ./migrations",
    "fleet": "queueguard fleet plan --targets fleet.toml --max-lock 2s --output markdown\n"
    "  queueguard fleet upgrade --targets fleet.toml --migrations db/migrations\n"
    "  queueguard fleet status --targets fleet.toml --output markdown\n"
    "  queueguard fleet verify --targets fleet.toml\n"
    "  queueguard fleet matrix --shards 4 --for github",
    "mutate": "queueguard mutate 004 --list\n"
    '  queueguard mutate 004 --jobs 2 --command "pytest upgrade_tests -x" --json',
}


def _add_examples(sub: Any) -> None:
    for name, command in sub.choices.items():
        command.formatter_class = argparse.RawDescriptionHelpFormatter
        command.epilog = f"example:\n  {EXAMPLES[name]}"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="queueguard", description=DESCRIPTION)
    parser.add_argument("--version", action="version", version=f"queueguard {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    # the order here is the order of `queueguard --help`
    _add_demo(sub)
    _add_status(sub)
    _add_inspect(sub)
    _add_db(sub)
    _add_upgrade(sub)
    _add_plan(sub)
    _add_preflight(sub)
    _add_verify(sub)
    _add_fixtures(sub)
    _add_snapshot(sub)
    _add_rehearse(sub)
    _add_lint(sub)
    _add_manifest(sub)
    _add_mutate(sub)
    add_fleet(sub)
    _add_examples(sub)
    return parser


def _add_demo(sub: Any) -> None:
    p = sub.add_parser("demo", help="the queue lifecycle walkthrough (memory and PostgreSQL)")
    add_dsn(p)
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=database_commands.cmd_demo)


def _add_status(sub: Any) -> None:
    p = sub.add_parser("status", help="revision, protocol, queue and row counts")
    add_dsn(p)
    add_migrations(p, formats=True)
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=database_commands.cmd_status)


def _add_inspect(sub: Any) -> None:
    p = sub.add_parser("inspect", help="both Matching tables' rows for one workflow")
    p.add_argument("workflow_id")
    p.add_argument("--namespace")
    add_dsn(p)
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=database_commands.cmd_inspect)


def _add_db(sub: Any) -> None:
    p = sub.add_parser("db", help="the embedded PostgreSQL server")
    p.add_argument("action", choices=["url", "start", "stop"])
    p.set_defaults(handler=database_commands.cmd_db)


def _add_upgrade(sub: Any) -> None:
    p = sub.add_parser("upgrade", help="apply the migrations (explicit target)")
    add_dsn(p, explicit=True)
    p.add_argument(
        "--to", help="a revision id, head (default), or for an Alembic set heads or BRANCH@head"
    )
    p.add_argument("--sql", action="store_true", help="render the SQL without connecting")
    p.add_argument("--lock-timeout", help="per lock wait (default 5s; --online: 500ms)")
    p.add_argument(
        "--statement-timeout", help="per statement (default 60m; --online: 60s; 0 = no limit)"
    )
    p.add_argument(
        "--retries", type=int, help="lock-timeout retries after the first attempt (3; online 10)"
    )
    p.add_argument("--force", action="store_true", help="upgrade even with older hosts connected")
    p.add_argument("--pooled", action="store_true", help="the DSN goes through a connection pooler")
    p.add_argument(
        "--max-lock",
        help="another format's set: refuse a revision whose plan holds a read/write-blocking "
        "lock longer (--force applies it anyway); with --online: the lock budget (default 1s) "
        "over which a statement runs in its online form",
    )
    p.add_argument(
        "--scratch-dsn",
        help="with --max-lock or --online: admin DSN of the server for the scratch copies",
    )
    p.add_argument(
        "--sample-rows",
        type=int,
        default=100_000,
        help="with --max-lock or --online: rows per table in the scratch copies (100000)",
    )
    online = p.add_argument_group("online upgrade (the fleet keeps running; docs/upgrade.md)")
    online.add_argument(
        "--online",
        action="store_true",
        help="queueguard's set: expand, migrate, contract; a set of another format: every "
        "statement over --max-lock in its online form, proven on a scratch copy first",
    )
    online.add_argument(
        "--phase",
        choices=["expand", "migrate", "contract", "abort"],
        help="run only this phase (default: every phase that is due); a set of another "
        "format: abort undoes the statement in flight",
    )
    online.add_argument("--batch-size", type=int, default=1000, help="rows per batch")
    online.add_argument("--pause", default="0", help="sleep between batches (e.g. 100ms)")
    online.add_argument(
        "--max-lag", default="10s", help="pause while a standby lags more (0 = ignore lag)"
    )
    online.add_argument("--lease", default="15s", help="the migrator's lease")
    online.add_argument("--wait", default="30s", help="wait this long for another migrator")
    add_migrations(p, formats=True)
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=upgrade_commands.cmd_upgrade)


def _add_plan(sub: Any) -> None:
    p = sub.add_parser(
        "plan", help="the downtime bill: each pending statement's locks and cost on a database"
    )
    add_dsn(p, explicit=True)
    p.add_argument("--to", help="a revision id or head (default: head)")
    p.add_argument(
        "--scratch-dsn",
        help="admin DSN of the server for the scratch copy (default: the target's server)",
    )
    p.add_argument(
        "--max-lock", help="exit 1 if a statement holds a read/write-blocking lock longer"
    )
    p.add_argument(
        "--sample-rows",
        type=int,
        default=100_000,
        help="rows per table copied to the scratch copy (default 100000)",
    )
    p.add_argument(
        "--online",
        action="store_true",
        help="the online bill: each statement over --max-lock (default 1s) in its online "
        "form, its longest blocking lock, extra disk and time",
    )
    add_migrations(p, formats=True)
    add_output(p)
    p.set_defaults(handler=verify_commands.cmd_plan)


def _add_preflight(sub: Any) -> None:
    p = sub.add_parser("preflight", help="read-only, bounded-lock audit before an upgrade")
    add_dsn(p, explicit=True)
    p.add_argument("--target", default="head", help="a revision id or head")
    p.add_argument("--lock-timeout", default="5s", help="per lock wait (default 5s)")
    p.add_argument("--statement-timeout", default="60s", help="per check (default 60s)")
    p.add_argument("--samples", type=int, default=10, help="samples per finding (0…1000)")
    p.add_argument("--fail-on", choices=["blocking", "warning"], default="blocking")
    p.add_argument("--pooled", action="store_true", help="the DSN goes through a connection pooler")
    add_migrations(p)
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=upgrade_commands.cmd_preflight)


def _add_verify(sub: Any) -> None:
    p = sub.add_parser("verify", help="upgrade CI against the golden fixtures")
    p.add_argument(
        "--dsn",
        help="admin DSN of a server for scratch databases "
        "(default: QUEUEGUARD_PG, the embedded server)",
    )
    p.add_argument("--fixture", action="append", help="only this fixture (repeatable)")
    p.add_argument(
        "--fixtures",
        metavar="DIR",
        help="the golden fixtures (default: the packaged ones); another format's set: "
        "databases frozen at older revisions, <revision>--<name>.sql or .dump",
    )
    add_migrations(p, formats=True)
    p.add_argument("--fresh", metavar="FILE", help="another format's set: its fresh-install SQL")
    p.add_argument(
        "--base",
        metavar="FILE",
        help="another format's set: the schema its first revision starts from (a psql script, "
        "e.g. what the application's create_all() makes, or a pg_dump -Fc .dump), loaded "
        "before the chain",
    )
    p.add_argument(
        "--invariants",
        metavar="FILE",
        help="another format's set: `-- name: NAME` read-only queries, same rows before and "
        "after each fixture's upgrade",
    )
    add_output(p)
    p.set_defaults(handler=verify_commands.cmd_verify)


def _add_fixtures(sub: Any) -> None:
    p = sub.add_parser("fixtures", help="list or load the golden fixtures")
    p.add_argument("action", choices=["list", "load"])
    p.add_argument("name", nargs="?")
    add_dsn(p, explicit=True)
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=database_commands.cmd_fixtures)


def _add_snapshot(sub: Any) -> None:
    p = sub.add_parser("snapshot", help="export or import (validate) a snapshot")
    p.add_argument("action", choices=["export", "import"])
    p.add_argument("file", nargs="?", help="snapshot file to import")
    p.add_argument("-o", "--output", help="export: write to this file")
    add_dsn(p, explicit=True)
    p.set_defaults(handler=database_commands.cmd_snapshot)


def _add_rehearse(sub: Any) -> None:
    p = sub.add_parser("rehearse", help="rehearse the upgrade on a copy of a database")
    add_dsn(p, explicit=True)
    p.add_argument(
        "--scratch-dsn", help="admin DSN of the server for the copy (default: the source server)"
    )
    p.add_argument("--to", help="another format's set: a revision id or head (default)")
    p.add_argument(
        "--invariants",
        metavar="FILE",
        help="another format's set: `-- name:` queries whose rows must not change",
    )
    add_migrations(p, formats=True)
    add_output(p)
    p.set_defaults(handler=verify_commands.cmd_rehearse)


def _add_lint(sub: Any) -> None:
    p = sub.add_parser(
        "lint",
        help="the migration safety gate: squawk's rules and queueguard's own (docs/lint.md)",
    )
    p.add_argument(
        "paths",
        nargs="*",
        metavar="PATH",
        help="migration directories, step files, audit queries or .sql files "
        "(default: the packaged migrations/ and audit_queries/)",
    )
    add_output(p, LINT_OUTPUTS)
    add_migrations(p, formats=True)
    p.add_argument(
        "--dsn",
        help="a set of another format only: observe its pending revisions on a copy of this "
        "database (plan's trace) instead of trusting squawk's guess",
    )
    p.set_defaults(handler=lint_commands.cmd_lint)


def _add_manifest(sub: Any) -> None:
    p = sub.add_parser("manifest", help="check (or --write) the migration set's manifest")
    p.add_argument("--write", action="store_true", help="regenerate it (releasing a revision)")
    add_migrations(p)
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=lint_commands.cmd_manifest)


def _add_mutate(sub: Any) -> None:
    p = sub.add_parser(
        "mutate", help="mutation testing of a revision: how strong are the upgrade gates"
    )
    p.add_argument("revision", nargs="?", help="the revision to mutate (default: the head)")
    p.add_argument("--list", action="store_true", help="print the mutants; run no gate")
    p.add_argument("--operator", action="append", help="only this operator (repeatable)")
    p.add_argument("--mutant", action="append", metavar="ID", help="only this mutant (repeatable)")
    p.add_argument(
        "--scope",
        choices=["steps", "online", "all"],
        default="steps",
        help="mutate the step files (default), the online path (sql/<rev>/online/) or both",
    )
    p.add_argument(
        "--command",
        help="also run this shell command per mutant (QUEUEGUARD_MIGRATIONS=<the mutated copy>); "
        "a non-zero exit kills the mutant",
    )
    p.add_argument("--timeout", default="120s", help="per mutant (default 120s): counts as killed")
    p.add_argument("--jobs", type=int, default=2, help="mutants judged in parallel (default 2)")
    p.add_argument(
        "--equivalents",
        metavar="FILE",
        help="the reviewed equivalent mutants (default: mutation-equivalents.toml in the set)",
    )
    p.add_argument(
        "--dsn",
        help="admin DSN of a server for scratch databases "
        "(default: QUEUEGUARD_PG, the embedded server)",
    )
    p.add_argument(
        "--fixtures", metavar="DIR", help="the golden fixtures (default: the packaged ones)"
    )
    add_migrations(p)
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=lint_commands.cmd_mutate)
