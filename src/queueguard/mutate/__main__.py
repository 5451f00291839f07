"""`python -m queueguard.mutate worker FD NUMBER`: a mutation worker (started by the runner)."""

from __future__ import annotations

import sys

from queueguard.mutate import worker

if __name__ == "__main__":
    if sys.argv[1:2] != ["worker"] or len(sys.argv) != 4:
        sys.exit("usage: python -m queueguard.mutate worker FD NUMBER (queueguard mutate runs it)")
    worker.main(sys.argv[2:])
