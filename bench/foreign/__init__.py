"""Upgrade of a foreign migration set under load (docs/benchmarks.md, "Foreign upgrade under
load"): `python -m bench.foreign`.

`load` is the driver the test (`tests/foreign/test_upgrade_under_load.py`) and the benchmark
share: writers inserting into `events`, an optional long reader, a revision that takes ACCESS
EXCLUSIVE on `events`, applied by `queueguard.upgrade.foreign.runner.upgrade` or by an
emulation of how temporal-sql-tool applies statements; `benchmark` runs the cases at a larger
size and renders the section."""
