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

    /work/venv/bin/python bench/chaos_privileges.py             # every command x DSN form
    /work/venv/bin/python bench/chaos_privileges.py --quick --no-docs
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import logging
import secrets
import subprocess
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import _chaos
from _chaos import ScratchServer, say

from queueguard.errors import QueueguardError
from queueguard.upgrade import golden

QUEUEGUARD = str(Path(_chaos.PYTHON).with_name("queueguard"))
CI_TEST = "`tests/test_reliability_security.py` (all checks, fewer DSN forms)"
RUNTIME_TABLES = ("task_queues", "tasks", "task_queue_user_data", "executions", "scheduled_tasks")


@dataclass
class Result:
    checks: list[str] = field(default_factory=list)
    cli_runs: int = 0
    api_calls: int = 0
    leaks: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)

    def ok(self, name: str, cond: bool, detail: str = "") -> None:
        self.checks.append(name)
        if not cond:
            self.failures.append(f"{name}: {detail}"[:3000])


class Roles:
    def __init__(self, server: ScratchServer) -> None:
        token = secrets.token_hex(4)
        self.server = server
        self.passwords = {
            "qg_owner": f"Own3r-{token}:p@ss/w?rd#%",
            "qg_reader": f"Read3r-{token} 'quoted'",
            "qg_runtime": f"Runt1me-{token}&x=y",
        }
        admin = server.admin_dsn()
        for role, password in self.passwords.items():
            escaped = password.replace("'", "''")
            _chaos.query(admin, f"CREATE ROLE {role} LOGIN PASSWORD '{escaped}'")

    def url(self, role: str, db: str, password: str | None = None) -> str:
        return self.server.tcp_dsn(role, password or self.passwords[role], db)

    def keyvalue(self, role: str, db: str, password: str | None = None) -> str:
        pw = (password or self.passwords[role]).replace("\\", "\\\\").replace("'", "\\'")
        return (
            f"host=127.0.0.1 port={self.server.port} dbname={db} user={role} "
            f"password='{pw}' sslmode=disable"
        )

    def secrets(self) -> list[str]:
        out = []
        for pw in self.passwords.values():
            out += [pw, quote(pw, safe=""), pw.replace("'", "\\'")]
        return out


def grant(owner_dsn: str) -> None:
    tables = ", ".join(RUNTIME_TABLES)
    _chaos.query(
        owner_dsn,
        "REVOKE CREATE ON SCHEMA public FROM PUBLIC;"
        "GRANT USAGE ON SCHEMA public TO qg_reader, qg_runtime;"
        "GRANT SELECT ON ALL TABLES IN SCHEMA public TO qg_reader;"
        f"GRANT SELECT, INSERT, UPDATE, DELETE ON {tables} TO qg_runtime;"
        "GRANT SELECT ON runtime_protocol, queueguard_version TO qg_runtime;",
    )


def cli(argv: list[str], result: Result, roles: Roles) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [QUEUEGUARD, *argv], capture_output=True, text=True, timeout=300, cwd="/tmp"
    )
    result.cli_runs += 1
    for secret in roles.secrets():
        for stream, text in (("stdout", done.stdout), ("stderr", done.stderr)):
            if secret in text:
                shown = [a if not any(s in a for s in roles.secrets()) else "<dsn>" for a in argv]
                result.leaks.append(f"queueguard {' '.join(shown)}: password in {stream}")
    return done


def fingerprint(dsn: str) -> Any:
    from chaos_fuzz import fingerprint as fp

    return fp(dsn)


def run(*, quick: bool = False, log: Any = say) -> Result:
    result = Result()
    with ScratchServer(tcp=True) as server:
        admin = server.admin_dsn()
        roles = Roles(server)
        for db in ("lp_head", "lp_v3", "lp_empty"):
            _chaos.create_database(admin, db, owner="qg_owner")
        owner = {db: roles.url("qg_owner", db) for db in ("lp_head", "lp_v3", "lp_empty")}

        # 3. the upgrade and fixture loading under the owner
        done = cli(["fixtures", "load", "v0.3", "--dsn", owner["lp_v3"]], result, roles)
        result.ok("owner loads the v0.3 fixture", done.returncode == 0, done.stderr)
        done = cli(["upgrade", "--dsn", owner["lp_head"], "--json"], result, roles)
        result.ok("owner upgrades an empty database to head", done.returncode == 0, done.stderr)
        for db in ("lp_head", "lp_v3"):
            grant(owner[db])
        v3_before = fingerprint(owner["lp_v3"])
        for role in ("qg_reader", "qg_runtime"):
            done = cli(["upgrade", "--dsn", roles.url(role, "lp_v3")], result, roles)
            result.ok(
                f"upgrade as {role} fails cleanly",
                done.returncode == 1 and "Traceback" not in done.stderr,
                done.stderr,
            )
            result.ok(
                f"upgrade as {role} changed nothing", fingerprint(owner["lp_v3"]) == v3_before
            )

        # 1. preflight under the read-only role, with a v0.3 host connected as the runtime role
        from queueguard.upgrade.legacy import V03Worker

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
            result.ok("preflight wrote nothing", fingerprint(owner["lp_v3"]) == v3_before)
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
    import uuid

    import psycopg

    from queueguard.core.history import task_payload
    from queueguard.core.keys import PhysicalQueue
    from queueguard.core.store import Execution
    from queueguard.errors import MigrationError, SchemaTooOld
    from queueguard.runtime.matching import Matching
    from queueguard.stores.postgres import PostgresStore

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
            _chaos.query(dsn, ddl)
            refused = False
        except psycopg.errors.InsufficientPrivilege:
            refused = True
        result.ok(f"the DML role cannot: {ddl}", refused)
        calls += 1
    empty = roles.url("qg_runtime", "lp_empty")
    _chaos.query(roles.url("qg_owner", "lp_empty"), "GRANT USAGE ON SCHEMA public TO qg_runtime")
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
    tables = _chaos.query(
        roles.url("qg_owner", "lp_empty"),
        "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'",
    )
    result.ok("nothing was created in the empty database", tables == [(0,)], str(tables))
    return calls


def dsn_forms(roles: Roles, quick: bool) -> list[tuple[str, str]]:
    """(label, dsn) for every way a password reaches a command."""
    good_port = roles.server.port
    forms = [
        ("url", roles.url("qg_owner", "lp_head")),
        ("key=value", roles.keyvalue("qg_owner", "lp_head")),
        (
            "url, wrong password",
            roles.url("qg_owner", "lp_head", password=roles.passwords["qg_reader"]),
        ),
        (
            "key=value, wrong password",
            roles.keyvalue("qg_owner", "lp_head", password=roles.passwords["qg_runtime"]),
        ),
    ]
    if not quick:
        forms += [
            (
                "url, unreachable port",
                roles.url("qg_owner", "lp_head").replace(f":{good_port}/", ":1/"),
            ),
            (
                "key=value, unreachable port",
                roles.keyvalue("qg_owner", "lp_head").replace(f"port={good_port}", "port=1"),
            ),
            ("url, unknown database", roles.url("qg_owner", "nope")),
            (
                "key=value, unterminated quote",
                f"host=127.0.0.1 port={good_port} dbname=lp_head user=qg_owner "
                f"password='x {roles.passwords['qg_owner']}",
            ),
            ("url, unknown parameter", roles.url("qg_owner", "lp_head") + "&bogus=1"),
            ("key=value, unknown parameter", roles.keyvalue("qg_owner", "lp_head") + " bogus=1"),
        ]
    return forms


def leak_checks(roles: Roles, result: Result, quick: bool) -> int:
    commands: list[list[str]] = [
        ["status"],
        ["status", "--json"],
        ["inspect", "wf-1", "--json"],
        ["preflight"],
        ["preflight", "--json"],
        ["upgrade"],
        ["upgrade", "--json"],
        ["snapshot", "export"],
        ["fixtures", "load", "v0.3"],
        ["rehearse"],  # the owner has no CREATEDB: this used to die with a psycopg traceback
    ]
    if not quick:
        snap = str(golden.snapshot_path("v3_golden.json"))
        commands += [
            ["snapshot", "import", snap],
            ["demo"],
            ["preflight", "--to", "x"],
        ]
    for label, dsn in dsn_forms(roles, quick):
        for command in commands:
            done = cli([*command, "--dsn", dsn], result, roles)
            result.ok(
                f"{' '.join(command)} with a {label} DSN exits cleanly",
                done.returncode in (0, 1, 2) and "Traceback" not in done.stderr,
                done.stderr[-800:],
            )
        # the same through the environment
        done = subprocess.run(
            [QUEUEGUARD, "status"],
            capture_output=True,
            text=True,
            timeout=120,
            env={**__import__("os").environ, "QUEUEGUARD_DSN": dsn},
        )
        result.cli_runs += 1
        for secret in roles.secrets():
            if secret in done.stdout + done.stderr:
                result.leaks.append(f"status via QUEUEGUARD_DSN ({label}): password in output")
    return api_leak_checks(roles, result, quick)


def api_leak_checks(roles: Roles, result: Result, quick: bool) -> int:
    """The Python API: exceptions (str, repr, traceback) and every log record."""
    from queueguard.pg.connect import connect
    from queueguard.pg.dsn import validate
    from queueguard.stores.postgres import PostgresStore
    from queueguard.upgrade import preflight, runner, status

    calls = 0
    records = io.StringIO()
    handler = logging.StreamHandler(records)
    handler.setLevel(logging.DEBUG)
    root = logging.getLogger()
    old_level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    try:
        for label, dsn in dsn_forms(roles, quick):
            for name, call in (
                ("PostgresStore", lambda d=dsn: PostgresStore(d, host_id="leak").close()),
                ("connect", lambda d=dsn: connect(d).close()),
                ("validate", lambda d=dsn: validate(d)),
                ("migrate.upgrade", lambda d=dsn: runner.upgrade(d, progress=False)),
                ("preflight", lambda d=dsn: preflight.preflight(d)),
                ("status", lambda d=dsn: status.status(d)),
            ):
                text = ""
                err = io.StringIO()
                try:
                    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(err):
                        call()
                except Exception as exc:
                    text = f"{exc}\n{exc!r}\n{''.join(traceback.format_exception(exc))}"
                text += err.getvalue()
                calls += 1
                for secret in roles.secrets():
                    if secret in text:
                        result.leaks.append(f"{name} with a {label} DSN: password in the exception")
    finally:
        root.removeHandler(handler)
        root.setLevel(old_level)
    for secret in roles.secrets():
        if secret in records.getvalue():
            result.leaks.append("password in a log record")
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
    _chaos.record(9, row, details)


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
