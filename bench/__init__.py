"""Benchmarks and chaos scenarios of queueguard (not shipped in the wheel).

Every script runs as a module from the repository root, e.g. `python -m bench.runtime` or
`python -m bench.chaos_crash --kills 5 --no-docs`; the reliability tests import the same
code (`from bench.chaos... import ...`) and run the scenarios at small scale.

- `bench.migration`, `bench.preflight`, `bench.runtime`: benchmarks whose figures go into
  docs/benchmarks.md (`bench.doc_sections`);
- `bench.chaos_*`: the chaos scenarios of docs/reliability.md, on the machinery of
  `bench.chaos` (scratch databases and servers, a fault-injecting TCP proxy, the commit
  audit, host processes and their ledger, the report table);
- `bench.commands`: how the scripts start child processes, and the command lines the
  generated docs show (never a path of this machine).
"""
