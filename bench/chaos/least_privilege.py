"""Chaos scenario 9: least privilege, and passwords that never leak.

A private PostgreSQL server also listens on 127.0.0.1 with SCRAM password logins. Three
login roles, each with a password (with characters that need percent-encoding in a URL):

- `qg_owner` owns the databases: the only role that loads fixtures and upgrades;
- `qg_reader`: CONNECT, USAGE on the schema and SELECT on the tables — preflight runs as it;
- `qg_runtime`: SELECT/INSERT/UPDATE/DELETE on the runtime's five tables and SELECT on
  `runtime_protocol` and `queueguard_version`, no CREATE anywhere — the runtime runs as it
  (`PostgresStore(create_schema=False)` on a head database).

Checked:
1. preflight under the read-only role reports the same findings as under the owner, including
   a v0.3 host connected as another role (runtime.older_hosts), and writes nothing;
2. the runtime under the DML role: load, spool, dispatch, checkpoint, user-data CAS, History
   all work; CREATE/ALTER/DROP/TRUNCATE are refused; on an empty database it refuses with a
   typed error (create_schema=False: "run queueguard upgrade"; create_schema=True: a failed
   migration, nothing created);
3. the upgrade under the owner succeeds; under the read-only or the DML role it fails cleanly
   (exit 1, nothing changed); the owner's upgrade refuses while the v0.3 host is connected;
4. passwords never appear: every CLI command, with the password in URL and key=value DSNs,
   with wrong passwords, unreachable ports and malformed DSNs, and the Python API's exceptions
   (str, repr, traceback) and log records — stdout, stderr, logs and messages are searched for
   each password, raw and percent-encoded.

    python -m bench.chaos.least_privilege  # every command x DSN form
    python -m bench.chaos.least_privilege --quick --no-docs
"""

from __future__ import annotations

import argparse
import json
import uuid
from typing import Any

import psycopg

from bench.chaos.privileges import Result, Roles, cli, leak_checks
from bench.common.databases import create_database, query
from bench.common.fingerprints import written_state
from bench.common.report import record, say
from bench.common.servers import ScratchServer
from queueguard.core.history import task_payload
from queueguard.core.keys import PhysicalQueue
from queueguard.core.store import Execution
from queueguard.errors import MigrationError, QueueguardError, SchemaTooOld
from queueguard.queue_schema.legacy import V03Worker
from queueguard.runtime.matching import Matching
from queueguard.stores.postgres import PostgresStore

CI_TEST = "`tests/test_reliability_security.py` (all checks, fewer DSN forms)"
RUNTIME_TABLES = ("task_queues", "tasks", "task_queue_user_data", "executions", "scheduled_tasks")


def grant(owner_dsn: str) -> None:
    tables = ", ".join(RUNTIME_TABLES)
    query(
        owner_dsn,
        "REVOKE CREATE ON SCHEMA public FROM PUBLIC;"
        "GRANT USAGE ON SCHEMA public TO qg_reader, qg_runtime;"
        "GRANT SELECT ON ALL TABLES IN SCHEMA public TO qg_reader;"
        f"GRANT SELECT, INSERT, UPDATE, DELETE ON {tables} TO qg_runtime;"
        "GRANT SELECT ON runtime_protocol, queueguard_version TO qg_runtime;",
    )


def run(*, quick: bool = False, log: Any = say) -> Result:
    result = Result()
    with ScratchServer(tcp=True) as server:
        admin = server.admin_dsn()
        roles = Roles(server)
        for db in ("lp_head", "lp_v3", "lp_empty"):
            create_database(admin, db, owner="qg_owner")
        owner = {db: roles.url("qg_owner", db) for db in ("lp_head", "lp_v3", "lp_empty")}

        # 3. the upgrade and fixture loading under the owner
        done = cli(["fixtures", "load", "v0.3", "--dsn", owner["lp_v3"]], result, roles)
        result.ok("owner loads the v0.3 fixture", done.returncode == 0, done.stderr)
        done = cli(["upgrade", "--dsn", owner["lp_head"], "--json"], result, roles)
        result.ok("owner upgrades an empty database to head", done.returncode == 0, done.stderr)
        for db in ("lp_head", "lp_v3"):
            grant(owner[db])
        v3_before = written_state(owner["lp_v3"])
        for role in ("qg_reader", "qg_runtime"):
            done = cli(["upgrade", "--dsn", roles.url(role, "lp_v3")], result, roles)
            result.ok(
                f"upgrade as {role} fails cleanly",
                done.returncode == 1 and "Traceback" not in done.stderr,
                done.stderr,
            )
            result.ok(
                f"upgrade as {role} changed nothing", written_state(owner["lp_v3"]) == v3_before
            )

        # 1. preflight under the read-only role, with a v0.3 host connected as the runtime role
        old_host = V03Worker(roles.url("qg_runtime", "lp_v3"), host_id="old-1", driver="psycopg")
        old_host.start()
        try:
            reports = {}
            for role in ("qg_owner", "qg_reader"):
                dsn = roles.url(role, "lp_v3")
                done = cli(["preflight", "--dsn", dsn, "--json"], result, roles)
                result.ok(f"preflight as {role} runs", done.returncode in (0, 1), done.stderr)
                reports[role] = json.loads(done.stdout) if done.stdout.strip() else {}
            codes = {
                r: sorted(f["code"] for f in rep.get("findings", [])) for r, rep in reports.items()
            }
            result.ok(
                "read-only preflight reports what the owner's does",
                codes["qg_reader"] == codes["qg_owner"],
                str(codes),
            )
            result.ok(
                "read-only preflight sees the v0.3 host of another role",
                "runtime.older_hosts" in codes["qg_reader"],
                str(codes),
            )
            result.ok("preflight wrote nothing", written_state(owner["lp_v3"]) == v3_before)
            done = cli(["upgrade", "--dsn", owner["lp_v3"]], result, roles)
            result.ok(
                "owner's upgrade refuses while the v0.3 host is connected",
                done.returncode == 1 and "old-1" in done.stderr,
                done.stderr,
            )
        finally:
            old_host.close()
        done = cli(["upgrade", "--dsn", owner["lp_v3"]], result, roles)
        result.ok("owner upgrades the v0.3 database", done.returncode == 0, done.stderr)

        # 2. the runtime under the DML role
        result.api_calls += runtime_checks(roles, result)

        # 4. passwords never appear
        result.api_calls += leak_checks(roles, result, quick)
        log(f"  {len(result.checks)} checks, {result.cli_runs} CLI runs, {result.api_calls} API")
        server_log = (server.server.data_dir / "server.log").read_text(errors="replace")
        for secret in roles.secrets()[::3]:  # our own CREATE ROLE statements aside
            if secret in server_log:
                result.leaks.append("password in the server log")
    return result


def runtime_checks(roles: Roles, result: Result) -> int:
    calls = 0
    dsn = roles.url("qg_runtime", "lp_head")
    store = PostgresStore(dsn, host_id="least-privilege", create_schema=False)
    try:
        queue = PhysicalQueue("lp", "orders")
        matching = Matching(store, "least-privilege")
        run_id = str(uuid.uuid4())
        store.history.add_execution(Execution(run_id, "lp", "wf-1"))
        store.history.schedule_task(run_id, 1, "workflow")
        added = matching.add_task(queue, task_payload("lp", "wf-1", run_id, "workflow", 1))
        delivery = matching.poll(queue)
        state = store.queue_state(queue)
        version = store.put_user_data("lp", "orders", 0, {"a": 1})
        result.ok(
            "the runtime works under the DML role",
            added.task_id == 1
            and delivery is not None
            and state is not None
            and state.ack_level == 1
            and version == 1
            and store.task_ids(queue) == [],
            f"{added} {delivery} {state}",
        )
        matching.shutdown()
        calls += 8
    finally:
        store.close()
    for ddl in (
        "CREATE TABLE intruder (id int)",
        "ALTER TABLE tasks ADD COLUMN intruder int",
        "DROP TABLE tasks",
        "TRUNCATE tasks",
        "CREATE INDEX intruder ON tasks (task_id)",
        "UPDATE runtime_protocol SET min_protocol = 3",
        "DELETE FROM queueguard_version",
    ):
        try:
            query(dsn, ddl)
            refused = False
        except psycopg.errors.InsufficientPrivilege:
            refused = True
        result.ok(f"the DML role cannot: {ddl}", refused)
        calls += 1
    empty = roles.url("qg_runtime", "lp_empty")
    query(roles.url("qg_owner", "lp_empty"), "GRANT USAGE ON SCHEMA public TO qg_runtime")
    for create, expected in ((False, SchemaTooOld), (True, MigrationError)):
        try:
            PostgresStore(empty, host_id="lp", create_schema=create).close()
            outcome: Any = None
        except QueueguardError as exc:
            outcome = exc
        result.ok(
            f"the DML role on an empty database refuses (create_schema={create})",
            isinstance(outcome, expected),
            repr(outcome),
        )
        calls += 1
    tables = query(
        roles.url("qg_owner", "lp_empty"),
        "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'",
    )
    result.ok("nothing was created in the empty database", tables == [(0,)], str(tables))
    return calls


def check(result: Result) -> None:
    assert not result.failures, "\n".join(result.failures)
    assert not result.leaks, "\n".join(result.leaks)


def report(result: Result) -> None:
    privilege = sum(not c.endswith("exits cleanly") for c in result.checks)
    row = {
        "Scenario": "Least privilege",
        "Scale": "3 roles with passwords over TCP (owner, read-only, DML-only), private server",
        "Faults injected": f"{privilege} privilege checks; {result.cli_runs} CLI runs and "
        f"{result.api_calls} API calls with passwords in URL and key=value DSNs (right, wrong, "
        "unreachable, malformed)",
        "Tasks produced": "n/a",
        "Lost": "0 (passwords leaked: 0)" if not result.leaks else f"{len(result.leaks)} leaks",
        "Duplicated-and-rejected": "n/a",
        "Worst stall": "n/a",
        "CI test (small scale)": CI_TEST,
    }
    details = [f"- {c}" for c in result.checks if not c.endswith("exits cleanly")]
    details.append(
        f"- plus {sum(c.endswith('exits cleanly') for c in result.checks)} CLI runs that exited "
        "0/1/2 without a traceback and without the password in stdout or stderr"
    )
    record(9, row, details)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer DSN forms and commands")
    parser.add_argument("--no-docs", action="store_true")
    args = parser.parse_args()
    say("scenario 9: least privilege and password hygiene")
    result = run(quick=args.quick)
    say(f"  failures: {result.failures}\n  leaks: {result.leaks}")
    check(result)
    if not args.no_docs:
        report(result)
    say("least privilege holds; no password in any output")


if __name__ == "__main__":
    main()
