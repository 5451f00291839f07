"""`python -m bench.foreign`: runs `bench.foreign.benchmark`; `--help` lists its options."""

import sys

from bench.foreign.benchmark import main

sys.argv[0] = "python -m bench.foreign"  # what argparse's usage line shows
raise SystemExit(main())
