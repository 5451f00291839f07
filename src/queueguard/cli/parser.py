"""The argument parser of the `queueguard` command line (one sub-command per handler)."""

from __future__ import annotations

import argparse
from typing import Any

from queueguard import __version__
from queueguard.cli import (
    database_commands,
    fleet_commands,
    lint_commands,
    upgrade_commands,
    verify_commands,
)
from queueguard.sets.model import FORMATS

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


def _add_dsn(p: argparse.ArgumentParser, *, explicit: bool = False) -> None:
    p.add_argument(
        "--dsn",
        help="PostgreSQL DSN (default: $QUEUEGUARD_DSN"
        + (")" if explicit else ", else the embedded server)"),
    )
    if explicit:
        p.add_argument("--embedded", action="store_true", help="target the embedded server")


def _add_migrations(p: argparse.ArgumentParser, *, formats: bool = False) -> None:
    p.add_argument(
        "--migrations",
        metavar="DIR",
        help="the migration set (an Alembic script directory; default: the packaged one)"
        if not formats
        else "the migration set: queueguard's, an Alembic project, Temporal's versioned "
        "folder, a Django project (the folder of its manage.py) or a directory of .sql files "
        "(default: the packaged one)",
    )
    if formats:
        p.add_argument(
            "--format",
            choices=list(FORMATS),
            help="the set's format (default: detected)",
        )
        _add_django(p)


def _add_django(p: argparse.ArgumentParser) -> None:
    """A Django project's interpreter, settings and alias (docs/django.md)."""
    p.add_argument(
        "--python",
        metavar="PATH",
        help="a Django project: the interpreter its code runs in (default: queueguard's, "
        "when Django imports there)",
    )
    p.add_argument(
        "--settings",
        metavar="MODULE",
        help="a Django project: its settings module (default: DJANGO_SETTINGS_MODULE, else "
        "what manage.py sets)",
    )
    p.add_argument(
        "--database",
        metavar="ALIAS",
        default="default",
        help="a Django project: the DATABASES alias the target replaces (default: default)",
    )
    p.add_argument(
        "--allow-custom-migrate",
        action="store_true",
        help="a Django project: drive its own migrate command or database backend (refused "
        "by default)",
    )


#: what `--output` renders: the text for a terminal, the JSON document, the pull-request
#: comment (Markdown); lint also GitHub workflow commands (annotations) and SARIF 2.1.0
OUTPUTS = ("text", "json", "markdown")
LINT_OUTPUTS = (*OUTPUTS, "github", "sarif")


def _add_output(p: argparse.ArgumentParser, choices: tuple[str, ...] = OUTPUTS) -> None:
    p.add_argument(
        "--output",
        choices=choices,
        help="what to print: " + ", ".join(choices) + " (default text; docs/interfaces.md, Output)",
    )
    p.add_argument("--json", action="store_true", help="the same as --output json")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="queueguard", description=DESCRIPTION)
    parser.add_argument("--version", action="version", version=f"queueguard {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("demo", help="the queue lifecycle walkthrough (memory and PostgreSQL)")
    _add_dsn(p)
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=database_commands.cmd_demo)

    p = sub.add_parser("status", help="revision, protocol, queue and row counts")
    _add_dsn(p)
    _add_migrations(p, formats=True)
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=database_commands.cmd_status)

    p = sub.add_parser("inspect", help="both Matching tables' rows for one workflow")
    p.add_argument("workflow_id")
    p.add_argument("--namespace")
    _add_dsn(p)
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=database_commands.cmd_inspect)

    p = sub.add_parser("db", help="the embedded PostgreSQL server")
    p.add_argument("action", choices=["url", "start", "stop"])
    p.set_defaults(handler=database_commands.cmd_db)

    p = sub.add_parser("upgrade", help="apply the migrations (explicit target)")
    _add_dsn(p, explicit=True)
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
    _add_migrations(p, formats=True)
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=upgrade_commands.cmd_upgrade)

    p = sub.add_parser(
        "plan", help="the downtime bill: each pending statement's locks and cost on a database"
    )
    _add_dsn(p, explicit=True)
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
    _add_migrations(p, formats=True)
    _add_output(p)
    p.set_defaults(handler=verify_commands.cmd_plan)

    p = sub.add_parser("preflight", help="read-only, bounded-lock audit before an upgrade")
    _add_dsn(p, explicit=True)
    p.add_argument("--target", default="head", help="a revision id or head")
    p.add_argument("--lock-timeout", default="5s", help="per lock wait (default 5s)")
    p.add_argument("--statement-timeout", default="60s", help="per check (default 60s)")
    p.add_argument("--samples", type=int, default=10, help="samples per finding (0…1000)")
    p.add_argument("--fail-on", choices=["blocking", "warning"], default="blocking")
    p.add_argument("--pooled", action="store_true", help="the DSN goes through a connection pooler")
    _add_migrations(p)
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=upgrade_commands.cmd_preflight)
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
    _add_migrations(p, formats=True)
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
    _add_output(p)
    p.set_defaults(handler=verify_commands.cmd_verify)

    p = sub.add_parser("fixtures", help="list or load the golden fixtures")
    p.add_argument("action", choices=["list", "load"])
    p.add_argument("name", nargs="?")
    _add_dsn(p, explicit=True)
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=database_commands.cmd_fixtures)

    p = sub.add_parser("snapshot", help="export or import (validate) a snapshot")
    p.add_argument("action", choices=["export", "import"])
    p.add_argument("file", nargs="?", help="snapshot file to import")
    p.add_argument("-o", "--output", help="export: write to this file")
    _add_dsn(p, explicit=True)
    p.set_defaults(handler=database_commands.cmd_snapshot)

    p = sub.add_parser("rehearse", help="rehearse the upgrade on a copy of a database")
    _add_dsn(p, explicit=True)
    p.add_argument(
        "--scratch-dsn", help="admin DSN of the server for the copy (default: the source server)"
    )
    p.add_argument("--to", help="another format's set: a revision id or head (default)")
    p.add_argument(
        "--invariants",
        metavar="FILE",
        help="another format's set: `-- name:` queries whose rows must not change",
    )
    _add_migrations(p, formats=True)
    _add_output(p)
    p.set_defaults(handler=verify_commands.cmd_rehearse)

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
    _add_output(p, LINT_OUTPUTS)
    _add_migrations(p, formats=True)
    p.add_argument(
        "--dsn",
        help="a set of another format only: observe its pending revisions on a copy of this "
        "database (plan's trace) instead of trusting squawk's guess",
    )
    p.set_defaults(handler=lint_commands.cmd_lint)

    p = sub.add_parser("manifest", help="check (or --write) the migration set's manifest")
    p.add_argument("--write", action="store_true", help="regenerate it (releasing a revision)")
    _add_migrations(p)
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=lint_commands.cmd_manifest)

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
    _add_migrations(p)
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=lint_commands.cmd_mutate)

    _add_fleet(sub)
    _add_examples(sub)
    return parser


def sample_rows_default() -> int:
    from queueguard.engine.plan.sample import DEFAULT_ROWS

    return DEFAULT_ROWS


def _add_fleet(sub: Any) -> None:
    p = sub.add_parser("fleet", help="one migration set across many databases and tenant schemas")
    fleet = p.add_subparsers(dest="fleet_command", required=True)

    def common(q: argparse.ArgumentParser) -> None:
        q.add_argument("--targets", required=True, metavar="FILE", help="the targets file (TOML)")
        q.add_argument(
            "--migrations", metavar="DIR", help="the set (default: the file's, else ours)"
        )
        q.add_argument("--format", choices=list(FORMATS))
        _add_django(q)
        q.add_argument("--output", choices=OUTPUTS)
        q.add_argument("--json", action="store_true", help="the same as --output json")

    q = fleet.add_parser("plan", help="the fleet's downtime bill, each target at its size")
    common(q)
    q.add_argument("--to", help="the target revision (default head)")
    q.add_argument("--max-lock", help="the lock budget: statements over it are named")
    q.add_argument(
        "--scratch-dsn",
        metavar="ADMIN_DSN",
        help="the server for the traces' scratch copies (default: the target's)",
    )
    q.add_argument(
        "--sample-rows",
        type=int,
        default=sample_rows_default(),
        help="rows per table in the traced sample",
    )

    q = fleet.add_parser("upgrade", help="bring every target to the set's head, wave by wave")
    common(q)
    q.add_argument("--control", metavar="DSN",
                   help="the control database (default $QUEUEGUARD_CONTROL_DSN, else the "
                   "embedded server's)")  # fmt: skip
    q.add_argument("--to", help="the target revision (default head)")
    q.add_argument(
        "--parallel",
        type=int,
        default=4,
        help="targets at once in a wave with no parallel of its own (default 4)",
    )
    q.add_argument("--run", help="join this run id, or `new` to start another")
    q.add_argument("--claim-ttl", default="30s", help="lease length (default 30s)")
    q.add_argument(
        "--stop-grace",
        default="20s",
        help="after SIGTERM, how long the revisions in flight may run (default 20s)",
    )
    q.add_argument("--lock-timeout", help="first lock_timeout of the ladder (default 5s)")
    q.add_argument("--statement-timeout", help="statement_timeout (default 60m)")
    q.add_argument("--retries", type=int, help="lock-timeout retries per revision (default 3)")
    q.add_argument(
        "--max-lock",
        help="the lock budget: fleet plan prices every target first; a target with a "
        "statement over it fails at its claim, nothing run (with --online: the forms' "
        "budget, default 1s)",
    )
    q.add_argument(
        "--scratch-dsn",
        metavar="ADMIN_DSN",
        help="the server for the plan's scratch copies (default: the target's)",
    )
    q.add_argument(
        "--online",
        action="store_true",
        help="every statement over the budget in an online form, proven once per group of "
        "targets at one revision and catalog",
    )
    q.add_argument(
        "--force",
        action="store_true",
        help="with --online: run a statement over the budget that has no form plain",
    )
    q.add_argument("--batch-size", type=int, default=1000, help="--online: rows per batch")
    q.add_argument("--pause", default="0", help="--online: sleep between batches")
    q.add_argument(
        "--max-lag", default="10s", help="--online: pause while a standby lags more (0: ignore)"
    )
    q.add_argument("--events", metavar="FILE", help="append each state change as a JSON line")
    q.add_argument("--metrics", metavar="FILE",
                   help="the run's figures in the Prometheus text format")  # fmt: skip

    q = fleet.add_parser("status", help="the board of a run")
    common(q)
    q.add_argument("--control", metavar="DSN")
    q.add_argument("--to", help="the run's target revision (default head)")
    q.add_argument("--run", help="this run id (default: the newest of the targets file)")

    q = fleet.add_parser("verify", help="every target at head, every catalog the same")
    common(q)
    q.add_argument("--fresh", metavar="FILE",
                   help="also compare each group with this fresh-install schema (SQL)")  # fmt: skip

    q = fleet.add_parser("matrix", help="what a CI engine reads to start N runners of one run")
    q.add_argument("--shards", type=int, required=True)
    q.add_argument(
        "--for", dest="engine", choices=["github", "argo", "kubernetes"], default="github"
    )
    p.set_defaults(handler=fleet_commands.cmd_fleet)
