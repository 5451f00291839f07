"""`python -m bench.migration`: runs `bench.migration.benchmark`; `--help` lists its options."""

import sys

from bench.migration.benchmark import main

sys.argv[0] = "python -m bench.migration"  # what argparse's usage line shows
raise SystemExit(main())
