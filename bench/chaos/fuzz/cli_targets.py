"""Targets: fixture loading and CLI arguments (the CLI in-process and spawned, database).

`fixtures load NAME` with hostile names against empty, loaded and foreign databases loads a
shipped fixture into an empty database, or refuses (exit 1/2) and changes nothing. Random
command lines exit 0, 1 or 2, never with a traceback, and a database that a failed command
touched is unchanged.
"""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
from pathlib import Path

from bench.chaos.fuzz.cli_inputs import FIXTURE_NAMES, WRITERS
from bench.common.commands import QUEUEGUARD
from bench.common.databases import query
from bench.common.fingerprints import written_state
from queueguard import cli
from queueguard.pg.scratch import ScratchDatabases
from queueguard.queue_schema import golden
from queueguard.resources import fixtures_dir

# what Python prints above a traceback; a bare "Traceback" may be the generated input echoed back
TRACEBACK = "Traceback (most recent call last)"


def run_main(argv: list[str]) -> tuple[int, str, str]:
    """cli.main in this process: (exit code, stdout, stderr); any escaping exception fails."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(argv)
    return code, out.getvalue(), err.getvalue()


def run_spawned(argv: list[str], env: dict[str, str] | None = None) -> tuple[int, str, str]:
    done = subprocess.run(
        [QUEUEGUARD, *argv],
        capture_output=True,
        text=True,
        timeout=180,
        env={**os.environ, **(env or {})},
        cwd="/tmp",
    )
    return done.returncode, done.stdout, done.stderr


class FixtureTarget:
    """`fixtures load NAME --dsn` against a database in one of several states."""

    def __init__(self, admin: str) -> None:
        self.databases = ScratchDatabases(admin, prefix="qg_chaos_fuzz")
        self.dsn = self.databases.create()

    def reset(self, kind: str) -> None:
        query(self.dsn, "DROP SCHEMA public CASCADE; CREATE SCHEMA public")
        if kind == "foreign":
            query(self.dsn, "CREATE TABLE customers (id int PRIMARY KEY)")
        elif kind == "loaded":
            golden.load(golden.get("v0.2"), self.dsn)

    def check(self, name: str, kind: str) -> str:
        self.reset(kind)
        before = written_state(self.dsn)
        if "\x00" in name:  # a NUL cannot be passed in argv: argparse never sees it
            return "unpassable"
        code, _, err = run_main(["fixtures", "load", name, "--dsn", self.dsn])
        assert code in (0, 1, 2), (code, err)
        if code == 0:
            assert name in FIXTURE_NAMES and kind == "empty", (name, kind)
            assert query(self.dsn, "SELECT version_num FROM queueguard_version") == [
                (golden.get(name).revision,)
            ]
            return "loaded"
        assert written_state(self.dsn) == before, (name, kind, err)
        assert TRACEBACK not in err, err[-3000:]
        return "refused"

    def close(self) -> None:
        self.databases.drop_all()


class CliTarget:
    """Command lines against a database at 003 (the v0.3 fixture); if a command changed it,
    it must have been a writing command that succeeded, and the database is rebuilt."""

    def __init__(self, admin: str, folder: Path, spawn: bool) -> None:
        self.spawn = spawn
        self.databases = ScratchDatabases(admin, prefix="qg_chaos_fuzz")
        self.dsn = self.databases.create()
        self._fresh()
        folder.mkdir(parents=True, exist_ok=True)
        garbage = folder / "garbage.json"
        garbage.write_bytes(b"\xff\xfe{not json")
        deep = folder / "deep.json"
        deep.write_text("[" * 50000 + "]" * 50000)
        self.files = {
            "golden": str(fixtures_dir() / "snapshots" / "v3_golden.json"),
            "legacy": str(fixtures_dir() / "snapshots" / "legacy_v1.json"),
            "garbage": str(garbage),
            "deep": str(deep),
            "dir": str(folder),
            "missing": str(folder / "missing.json"),
        }
        self.rebuilt = 0

    def _fresh(self) -> None:
        """Back to the v0.3 fixture, in place (the DSN in the drawn command lines stays)."""
        query(self.dsn, "DROP SCHEMA public CASCADE; CREATE SCHEMA public")
        golden.load(golden.get("v0.3"), self.dsn)
        self.before = written_state(self.dsn)

    def check(self, argv: list[str]) -> str:
        env = {"QUEUEGUARD_DSN": self.dsn}
        if self.spawn:
            code, _, err = run_spawned(argv, env)
        else:
            saved = os.environ.get("QUEUEGUARD_DSN")
            os.environ["QUEUEGUARD_DSN"] = self.dsn
            try:
                code, _, err = run_main(argv)
            finally:
                if saved is None:
                    os.environ.pop("QUEUEGUARD_DSN", None)
                else:
                    os.environ["QUEUEGUARD_DSN"] = saved
        assert code in (0, 1, 2), (argv, code, err[-2000:])
        assert TRACEBACK not in err, (argv, err[-3000:])
        after = written_state(self.dsn)
        if after != self.before:
            assert code == 0 and argv[0] in WRITERS, (argv, code, err[-1000:])
            self.rebuilt += 1
            self._fresh()
        return f"exit {code}"

    def close(self) -> None:
        self.databases.drop_all()
