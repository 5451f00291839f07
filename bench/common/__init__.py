"""What more than one benchmark or scenario uses; one module per concern:

- `commands`: how the scripts start child processes (`python -m bench.…` with this
  interpreter, from the repository root) and the command lines the generated docs show;
- `doc_sections`: the generated `## Section`s of docs/benchmarks.md;
- `report`: one scenario's row and details in docs/reliability.md;
- `databases`: scratch databases on the shared server (`QUEUEGUARD_PG`, embedded by
  default), created and dropped through `queueguard.pg.scratch.ScratchDatabases`, and
  one-off queries;
- `servers`: private scratch servers (`ScratchServer`: our own data directory under /tmp,
  optionally also listening on 127.0.0.1 with password authentication) that a scenario may
  stop, crash and restart without disturbing anybody else;
- `v3_database` and `fingerprints`: the 003 database the upgrade scenarios and benchmarks
  migrate (and when an uninterrupted upgrade of it reaches 004's first step, where scenarios
  3 and 12 aim their kills), and the fingerprints that tell whether a database changed;
- `audit`: a row trigger on `task_queues` (test instrumentation, scratch databases only) that
  records every committed load, append and checkpoint with the writer's `application_name`;
  row locks make its sequence the commit order per queue, so a stale owner's commit after a
  takeover, a range that does not grow or an ack level that moves backwards is visible;
- `workload`: the queues and task identities the scenarios produce;
- `host` (`python -m bench.common.host CONFIG`): a Matching host with producers and
  consumers on the queues it owns, logging every confirmed spool, every History answer and
  every delivery as JSON lines, and handling fences and lost connections the way an
  embedding application must (log, unload, back off, retry); `host_process`: the parent's
  handle on one (start, SIGKILL, restart, terminate);
- `ledger`: the logs and the database read back into the figures the report table shows
  (tasks produced, lost, duplicated-and-rejected, worst stall) and the violations.
"""
