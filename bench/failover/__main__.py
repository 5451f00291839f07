"""`python -m bench.failover`: runs `bench.failover.scenario`; `--help` lists its options."""

import sys

from bench.failover.scenario import main

sys.argv[0] = "python -m bench.failover"  # what argparse's usage line shows
main()
