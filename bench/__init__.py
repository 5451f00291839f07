"""Benchmarks and chaos scenarios of queueguard (not shipped in the wheel).

Every script runs as a module from the repository root, e.g. `python -m bench.runtime` or
`python -m bench.chaos.crash --kills 5 --no-docs`; the tests import the same code
(`from bench.chaos import crash`) and run the scenarios at small scale. One folder per
concern:

- `bench.migration`, `bench.preflight`, `bench.runtime`, `bench.online`: the benchmarks
  whose figures go into docs/benchmarks.md (each runs as `python -m bench.<folder>`; the
  migration folder also holds `bench.migration.wal_estimate`), and `bench.plan`
  (`python -m bench.plan.estimate`: `plan`'s estimates against real durations);
- `bench.chaos`: chaos scenarios 1 to 11 of docs/reliability.md
  (`python -m bench.chaos.<scenario>`) and the parts only they use (the fault-injecting TCP
  proxy, the privilege checks, the hostile-input strategies);
- `bench.failover`: scenario 12, a leader failover during an upgrade (`python -m
  bench.failover`);
- `bench.topology`: real production parts the scenarios and tests start (PgBouncer,
  Patroni with etcd, a streaming standby);
- `bench.common`: what more than one of them uses: child processes and the command lines the
  generated docs show (`commands`, never a path of this machine), the generated sections of
  docs/benchmarks.md (`doc_sections`) and of docs/reliability.md (`report`), scratch
  databases and servers, the 003 database the upgrade scenarios migrate, and the runtime
  harness (host processes, their ledger, the commit audit).
"""
