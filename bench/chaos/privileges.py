"""Chaos scenario 9's building blocks: roles with passwords, and the search for leaks.

Three login roles on a private server listening on 127.0.0.1, each with a password holding
characters that need percent-encoding in a URL; the CLI run under them with stdout and
stderr searched for every password (raw, percent-encoded, escaped); and the leak checks:
every command and the Python API (exceptions, tracebacks, log records) with the password
in URL and key=value DSNs, right, wrong, unreachable and malformed.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import secrets
import subprocess
import traceback
from dataclasses import dataclass, field
from urllib.parse import quote

from bench.common.commands import QUEUEGUARD
from bench.common.databases import query
from bench.common.servers import ScratchServer
from queueguard.pg.connect import connect
from queueguard.pg.dsn import validate
from queueguard.queue_schema import golden, preflight, runner, status
from queueguard.stores.postgres import PostgresStore


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
            query(admin, f"CREATE ROLE {role} LOGIN PASSWORD '{escaped}'")

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
            env={**os.environ, "QUEUEGUARD_DSN": dsn},
        )
        result.cli_runs += 1
        for secret in roles.secrets():
            if secret in done.stdout + done.stderr:
                result.leaks.append(f"status via QUEUEGUARD_DSN ({label}): password in output")
    return api_leak_checks(roles, result, quick)


def api_leak_checks(roles: Roles, result: Result, quick: bool) -> int:
    """The Python API: exceptions (str, repr, traceback) and every log record."""
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
