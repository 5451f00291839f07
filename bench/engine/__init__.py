"""Upgrade of a migration set under load (docs/benchmarks.md, "Upgrade of a migration set
under load"): `python -m bench.engine`.

`load` is the driver the test (`tests/engine/test_upgrade_under_load.py`) and the benchmark
share: writers inserting into `events`, an optional long reader, a revision that takes ACCESS
EXCLUSIVE on `events`, applied by `queueguard.engine.apply.runner.upgrade` or by an
emulation of how temporal-sql-tool applies statements; `benchmark` runs the cases at a larger
size and renders the section."""
