"""`python -m bench.online`: runs `bench.online.benchmark`; `--help` lists its options."""

import sys

from bench.online.benchmark import main

sys.argv[0] = "python -m bench.online"  # what argparse's usage line shows
raise SystemExit(main())
