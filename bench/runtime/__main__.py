"""`python -m bench.runtime`: runs `bench.runtime.benchmark`; `--help` lists its options."""

import sys

from bench.runtime.benchmark import main

sys.argv[0] = "python -m bench.runtime"  # what argparse's usage line shows
raise SystemExit(main())
