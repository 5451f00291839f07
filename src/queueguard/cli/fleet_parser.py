"""The `queueguard fleet` command's arguments: its own sub-commands (plan, upgrade, status,
verify, matrix) over a targets file, kept apart from the single-database commands of
`cli.parser`.
"""

from __future__ import annotations

import argparse
from typing import Any

from queueguard.cli import fleet_commands
from queueguard.cli.options import OUTPUTS, add_django
from queueguard.sets.model import FORMATS


def sample_rows_default() -> int:
    from queueguard.engine.plan.sample import DEFAULT_ROWS

    return DEFAULT_ROWS


def add_fleet(sub: Any) -> None:
    p = sub.add_parser("fleet", help="one migration set across many databases and tenant schemas")
    fleet = p.add_subparsers(dest="fleet_command", required=True)
    _add_plan(fleet)
    _add_upgrade(fleet)
    _add_status(fleet)
    _add_verify(fleet)
    _add_matrix(fleet)
    p.set_defaults(handler=fleet_commands.cmd_fleet)


def _add_targets_and_set(q: argparse.ArgumentParser) -> None:
    """What every sub-command but matrix reads: the targets file and the set it runs."""
    q.add_argument("--targets", required=True, metavar="FILE", help="the targets file (TOML)")
    q.add_argument("--migrations", metavar="DIR", help="the set (default: the file's, else ours)")
    q.add_argument("--format", choices=list(FORMATS))
    add_django(q)
    q.add_argument("--output", choices=OUTPUTS)
    q.add_argument("--json", action="store_true", help="the same as --output json")


def _add_plan(fleet: Any) -> None:
    q = fleet.add_parser("plan", help="the fleet's downtime bill, each target at its size")
    _add_targets_and_set(q)
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


def _add_upgrade(fleet: Any) -> None:
    q = fleet.add_parser("upgrade", help="bring every target to the set's head, wave by wave")
    _add_targets_and_set(q)
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


def _add_status(fleet: Any) -> None:
    q = fleet.add_parser("status", help="the board of a run")
    _add_targets_and_set(q)
    q.add_argument("--control", metavar="DSN")
    q.add_argument("--to", help="the run's target revision (default head)")
    q.add_argument("--run", help="this run id (default: the newest of the targets file)")


def _add_verify(fleet: Any) -> None:
    q = fleet.add_parser("verify", help="every target at head, every catalog the same")
    _add_targets_and_set(q)
    q.add_argument("--fresh", metavar="FILE",
                   help="also compare each group with this fresh-install schema (SQL)")  # fmt: skip


def _add_matrix(fleet: Any) -> None:
    q = fleet.add_parser("matrix", help="what a CI engine reads to start N runners of one run")
    q.add_argument("--shards", type=int, required=True)
    q.add_argument(
        "--for", dest="engine", choices=["github", "argo", "kubernetes"], default="github"
    )
