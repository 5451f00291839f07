"""The preflight benchmark (docs/benchmarks.md, "Preflight"): `python -m bench.preflight`.

`benchmark` times `queueguard preflight` on a v0.3 database, its locks against a concurrent
writer, and calibrates its `estimate.*` findings; `report` renders the section."""
