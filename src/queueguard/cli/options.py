"""The options several commands share (a server, a migration set, what to print), defined
once so that `--dsn`, `--migrations`, `--format`, the Django options and `--output` read the
same in every command's --help, the fleet's included (`cli.parser`, `cli.fleet_parser`).
"""

from __future__ import annotations

import argparse

from queueguard.sets.model import FORMATS


def add_dsn(p: argparse.ArgumentParser, *, explicit: bool = False) -> None:
    p.add_argument(
        "--dsn",
        help="PostgreSQL DSN (default: $QUEUEGUARD_DSN"
        + (")" if explicit else ", else the embedded server)"),
    )
    if explicit:
        p.add_argument("--embedded", action="store_true", help="target the embedded server")


def add_migrations(p: argparse.ArgumentParser, *, formats: bool = False) -> None:
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
        add_django(p)


def add_django(p: argparse.ArgumentParser) -> None:
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


def add_output(p: argparse.ArgumentParser, choices: tuple[str, ...] = OUTPUTS) -> None:
    p.add_argument(
        "--output",
        choices=choices,
        help="what to print: " + ", ".join(choices) + " (default text; docs/interfaces.md, Output)",
    )
    p.add_argument("--json", action="store_true", help="the same as --output json")
