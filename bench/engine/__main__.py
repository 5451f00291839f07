"""`python -m bench.engine`: runs `bench.engine.benchmark`; `--help` lists its options."""

import sys

from bench.engine.benchmark import main

sys.argv[0] = "python -m bench.engine"  # what argparse's usage line shows
raise SystemExit(main())
