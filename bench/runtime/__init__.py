"""The runtime benchmark (docs/benchmarks.md, "Runtime"): `python -m bench.runtime`.

`benchmark` runs each workload of `workloads` in a child process of its own
(`python -m bench.runtime.workloads`); `report` renders the section."""
