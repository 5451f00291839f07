"""Chaos scenarios 1 to 11 of docs/reliability.md, one module each, and the parts only they use.

Each scenario runs at full scale as `python -m bench.chaos.<scenario>` (it prints its
figures, asserts that nothing was lost and rewrites its row of docs/reliability.md); the CI
tests (`tests/test_reliability_*.py`, `tests/topology/`) import the same `run()` functions
and call them at small scale. Scenario 12 (leader failover) is `bench.failover`.

1. `crash`: runtime crash under load; 2. `membership`: conflicting membership;
3. `upgrade_kill`: the upgrade killed at random points; 4. `lock_contention`; 5.
`connection`: connection loss; 6. `unknown_commit`: unknown commit outcome; 7.
`hostile_input`: fuzzing; 8. `two_runners`: concurrent upgrade runners; 9.
`least_privilege`; 10. `pooler_runners` and 11. `pooler_crash`: 8 and 1 through PgBouncer.

Their own parts:

- `proxy` (scenario 6): an in-process TCP proxy that understands just enough of the
  PostgreSQL wire protocol to cut a connection right after the client sent the message that
  commits a chosen statement (Sync / COMMIT), either forwarding it (the commit happens, its
  reply is lost) or not (nothing commits): the client cannot tell which;
- `privileges` (scenario 9) and `fuzz` (scenario 7): those scenarios' building blocks.

The machinery they share with scenario 12 and the other benchmarks (scratch databases and
servers, host processes, the ledger, the commit audit, the report table) is `bench.common`.
"""
