"""The migration benchmarks (docs/benchmarks.md, "Migration" and "WAL estimate").

`python -m bench.migration` (`benchmark`) times `queueguard upgrade` against the minimal
hand-written SQL on the v0.3 database and the v0.2 spool that `databases` builds;
`python -m bench.migration.wal_estimate` compares preflight's `estimate.wal` with the WAL
004 actually writes on the same v0.3 database."""
