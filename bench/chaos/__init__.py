"""The machinery of the chaos scenarios (`bench/chaos_*.py`, `tests/test_reliability_*.py`).

The scripts run each scenario at full scale and print its figures; the CI tests import the
same `run()` functions and call them at small scale. One module per concern:

- `databases`: scratch databases on the shared server (`QUEUEGUARD_PG`, embedded by
  default), created and dropped through `queueguard.pg.scratch.ScratchDatabases`, and
  one-off queries;
- `servers`: private scratch servers (`ScratchServer`: our own data directory under /tmp,
  optionally also listening on 127.0.0.1 with password authentication) that a scenario may
  stop, crash and restart without disturbing anybody else;
- `proxy`: an in-process TCP proxy that understands just enough of the PostgreSQL wire
  protocol to cut a connection right after the client sent the message that commits a
  chosen statement (Sync / COMMIT), either forwarding it (the commit happens, its reply is
  lost) or not (nothing commits): the client cannot tell which;
- `audit`: a row trigger on `task_queues` (test instrumentation, scratch databases only) that
  records every committed load, append and checkpoint with the writer's `application_name`;
  row locks make its sequence the commit order per queue, so a stale owner's commit after a
  takeover, a range that does not grow or an ack level that moves backwards is visible;
- `workload`: the queues and task identities the scenarios produce;
- `host` (`python -m bench.chaos.host CONFIG`): a Matching host with producers and consumers
  on the queues it owns, logging every confirmed spool, every History answer and every
  delivery as JSON lines, and handling fences and lost connections the way an embedding
  application must (log, unload, back off, retry); `host_process`: the parent's handle on
  one (start, SIGKILL, restart, terminate);
- `ledger`: the logs and the database read back into the figures the report table shows
  (tasks produced, lost, duplicated-and-rejected, worst stall) and the violations;
- `report`: writes one scenario's row and details into docs/reliability.md;
- `v3_database` and `fingerprints`: the 003 database the upgrade scenarios migrate, and the
  fingerprints that tell whether a database changed;
- `privileges` (scenario 9) and `fuzz` (scenario 7): those scenarios' building blocks.
"""
