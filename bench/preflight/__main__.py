"""`python -m bench.preflight`: runs `bench.preflight.benchmark`; `--help` lists its options."""

import sys

from bench.preflight.benchmark import main

sys.argv[0] = "python -m bench.preflight"  # what argparse's usage line shows
raise SystemExit(main())
