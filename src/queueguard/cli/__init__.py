"""The `queueguard` command line: parse, call one function, render.

Data goes to stdout, logs and progress to stderr. Exit codes: 0 ok, 1 findings/refusal/bad
input file, 2 usage error or unreachable server (docs/interfaces.md).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from queueguard.errors import QueueguardError
from queueguard.sets import django_start

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    # a Django project's runner first: its start runs beside ours (`sets.django_start`)
    django_start.early(sys.argv[1:] if argv is None else argv)
    try:
        return _run(argv)
    finally:
        django_start.end_unadopted()  # not left waiting in a process that goes on


def _run(argv: Sequence[str] | None) -> int:
    from queueguard.cli.parser import build_parser
    from queueguard.pg.dsn import redact

    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse exits 2 on usage errors already
        return int(exc.code or 0)
    try:
        code: int = args.handler(args)
        return code
    except QueueguardError as exc:
        print(f"queueguard: error: {redact(str(exc))}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
