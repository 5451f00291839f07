"""The online upgrade benchmark (docs/benchmarks.md, "Online upgrade"): `python -m bench.online`.

`benchmark` runs it: the 003 database (`database`), the v0.4 fleet dispatching throughout
(`fleet`), the v0.3 -> v0.4 handover of one queue (`handover`), each upgrade phase as a
process of its own (`measure`), the dispatch gaps (`gaps`), into `results`; `report` renders
them as the section."""
