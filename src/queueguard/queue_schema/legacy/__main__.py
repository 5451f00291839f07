"""`python -m queueguard.queue_schema.legacy --worker v0.3 --dsn DSN`: start a released host the way
an operator would and print one line: accepted, or the error that stops it."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from queueguard.errors import (
    QueueguardError,
)
from queueguard.pg.dsn import redact
from queueguard.queue_schema.legacy.catalog import WORKERS
from queueguard.queue_schema.legacy.sessions import DRIVERS
from queueguard.queue_schema.legacy.workers import LegacyQueue, V02Worker, worker_class


# command line -------------------------------------------------------------------------------
def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m queueguard.queue_schema.legacy",
        description="Start a released legacy host (v0.2/v0.3) against a database.",
    )
    parser.add_argument("--worker", choices=WORKERS, default="v0.3")
    parser.add_argument("--dsn", required=True)
    parser.add_argument("--host-id", default="legacy")
    parser.add_argument("--driver", choices=DRIVERS, default="pg8000")
    args = parser.parse_args(argv)
    worker = worker_class(args.worker)(args.dsn, host_id=args.host_id, driver=args.driver)
    label = worker.application_name or f"queueguard {args.worker}"
    try:
        worker.start()
        if isinstance(worker, V02Worker):
            worker.read(LegacyQueue("default", "default"), limit=1)  # its first poll
    except QueueguardError as exc:
        print(f"{label}: error: {redact(str(exc))}", file=sys.stderr)
        return exc.exit_code
    finally:
        worker.close()
    print(f"{label}: started")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
