"""A Django project's runner (`django_runner`, run by path in the project's own interpreter,
its folder as working directory), and the JSON lines queueguard exchanges with it.

The project's prints and logging arrive on the runner's stderr and are shown on ours, each
line with the migration running when it came. The target's connection fields replace only
those of `DATABASES[alias]`, and the runner's connection carries an `application_name` nonce
that is looked for in the target's `pg_stat_activity` before any statement runs: a settings
module that builds its connection some other way is refused, not trusted.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import threading
import uuid
from collections import deque
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from queueguard.errors import MigrationError, UsageError
from queueguard.pg import dsn as dsns
from queueguard.pg.connect import connect
from queueguard.sets.django_start import Project, adopt, spawn

#: what the runner's setup says where the interpreter has no Django
_NO_DJANGO = "No module named 'django'"
#: a connection parameter of the DSN that is a DATABASES field, not a libpq key of OPTIONS
_FIELDS = {"dbname": "NAME", "user": "USER", "password": "PASSWORD", "host": "HOST", "port": "PORT"}
#: Django's own backends (and PostGIS's), whose schema editor queueguard knows
STOCK_ENGINES = (
    "django.db.backends.postgresql",
    "django.contrib.gis.db.backends.postgis",
)


def connection_fields(dsn: str | None) -> tuple[dict[str, str], dict[str, str]]:
    """A DSN as DATABASES fields (NAME, USER, PASSWORD, HOST, PORT) and libpq keys for
    OPTIONS; no DSN: every field points at an address that refuses connections."""
    if dsn is None:
        return {"HOST": "/nonexistent/queueguard-refused", "NAME": "none"}, {}
    fields: dict[str, str] = {}
    libpq: dict[str, str] = {}
    for key, value in dsns.params(dsn).items():
        if key in _FIELDS:
            fields[_FIELDS[key]] = value
        else:
            libpq[key] = value
    return fields, libpq


@dataclass
class Runner:
    """One runner process, set up on `dsn` (None: no database; the graph only)."""

    project: Project
    dsn: str | None
    read_only: bool = False
    settings: Mapping[str, str] = field(default_factory=dict)
    facts: dict[str, Any] = field(default_factory=dict)
    #: the migration the runner is in (its stderr lines are shown with it)
    running: str | None = None
    _tail: deque[str] = field(default_factory=lambda: deque(maxlen=40))

    def __post_init__(self) -> None:
        # the runner the command line started first thing for this project, else a new one
        process = adopt(self.project) or spawn(self.project)
        self._process, self._commands, self._events = (
            process.popen,
            process.commands,
            process.events,
        )
        self._relay = threading.Thread(target=self._show_output, daemon=True)
        self._relay.start()
        self._setup()

    # --- the channel ------------------------------------------------------------------

    def send(self, **message: Any) -> None:
        try:
            self._commands.write(json.dumps(message) + "\n")
            self._commands.flush()
        except BrokenPipeError:
            raise self._gone() from None

    def receive(self) -> dict[str, Any]:
        line = self._events.readline()
        if not line:
            raise self._gone()
        event: dict[str, Any] = json.loads(line)
        if event.get("ev") == "error":
            raise MigrationError(self._said(event))
        return event

    def events(self) -> Iterator[dict[str, Any]]:
        while True:
            yield self.receive()

    def ask(self, op: str, **message: Any) -> dict[str, Any]:
        self.send(op=op, **message)
        return self.receive()

    def _said(self, event: dict[str, Any]) -> str:
        trace = event.get("trace") or ""
        where = "\n".join(trace.strip().splitlines()[-4:])
        return f"the Django project ({self.project.root}): {event.get('error')}" + (
            f"\n{where}" if where and "SystemExit" not in str(event.get("error")) else ""
        )

    def _gone(self) -> MigrationError:
        self._process.wait(timeout=10)
        self._relay.join(timeout=2)
        tail = "\n".join(self._tail)
        return MigrationError(
            f"the Django runner ended (exit {self._process.returncode}) in "
            f"{self.project.root}" + (f":\n{tail}" if tail else "")
        )

    def _show_output(self) -> None:
        assert self._process.stdout is not None
        for raw in self._process.stdout:
            line = raw.decode("utf-8", "replace").rstrip("\n")
            self._tail.append(line)
            print(f"  [{self.running or 'django'}] {line}", file=sys.stderr, flush=True)

    def close(self) -> None:
        if self._process.poll() is None:
            try:
                self.send(op="quit")
                self._process.wait(timeout=30)
            except (MigrationError, subprocess.TimeoutExpired, OSError, ValueError):
                self._process.kill()
                self._process.wait()
        for stream in (self._commands, self._events):
            with contextlib.suppress(OSError):
                stream.close()

    def kill(self) -> None:
        """Stop it now, whatever it was doing (a capture that failed on our side)."""
        if self._process.poll() is None:
            self._process.kill()
            self._process.wait()
        for stream in (self._commands, self._events):
            with contextlib.suppress(OSError):
                stream.close()

    def retarget(
        self, dsn: str | None, *, read_only: bool = False, settings: Mapping[str, str] = {}
    ) -> None:
        """Point the runner's alias at `dsn` (None: no database) with these session settings;
        its connection is found on the target by a new nonce, else refused."""
        fields, libpq = connection_fields(dsn)
        nonce = f"queueguard-django-{uuid.uuid4().hex[:16]}"
        given = {**settings, **({"default_transaction_read_only": "on"} if read_only else {})}
        self.send(op="retarget", fields=fields, libpq=libpq, settings=given, nonce=nonce,
                  connect=dsn is not None)  # fmt: skip
        ready = self.receive()
        self.dsn, self.read_only, self.settings = dsn, read_only, dict(settings)
        if dsn is not None:
            self._check_reached(nonce, ready.get("pid"))

    def __enter__(self) -> Runner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- setup ------------------------------------------------------------------------

    def _setup(self) -> None:
        fields, libpq = connection_fields(self.dsn)
        nonce = f"queueguard-django-{uuid.uuid4().hex[:16]}"
        settings = dict(self.settings)
        if self.read_only:
            settings["default_transaction_read_only"] = "on"
        try:
            ready = self._ask_setup(fields, libpq, nonce, settings)
        except MigrationError as exc:
            self.close()
            if _NO_DJANGO in str(exc):
                where = "--python" if self.project.python != sys.executable else "queueguard's"
                raise UsageError(
                    f"Django does not import in {self.project.python} ({where} interpreter): "
                    "give --python PATH, the interpreter of the project's environment"
                ) from None
            raise
        self.facts = ready
        if self.dsn is not None:
            self._check_reached(nonce, ready.get("pid"))

    def _ask_setup(
        self, fields: dict[str, str], libpq: dict[str, str], nonce: str, settings: dict[str, str]
    ) -> dict[str, Any]:
        self.send(
            op="setup",
            module=self.project.settings,
            alias=self.project.alias,
            fields=fields,
            libpq=libpq,
            settings=settings,
            nonce=nonce,
            connect=self.dsn is not None,
        )
        return self.receive()

    def _check_reached(self, nonce: str, pid: int | None) -> None:
        """The runner's connection is found on the target by its nonce, else refused."""
        assert self.dsn is not None
        with connect(self.dsn, autocommit=True) as conn:
            rows = conn.execute(
                "SELECT pid FROM pg_stat_activity WHERE application_name = %s", (nonce,)
            ).fetchall()
        if pid is None or pid not in {r[0] for r in rows}:
            self.close()
            raise UsageError(
                f"the Django project's connection (alias {self.project.alias!r}) did not "
                f"reach the target {dsns.redact(self.dsn)}: its settings build the connection "
                "some other way; nothing was run"
            )

    @property
    def custom_migrate(self) -> str | None:
        """The module of the project's own `migrate` command, when it is not Django's."""
        module = str(self.facts.get("migrate") or "django.core")
        return None if module == "django.core" else module

    @property
    def stock_backend(self) -> bool:
        engine = str(self.facts.get("engine") or "")
        editor = str(self.facts.get("editor") or "")
        known = engine in STOCK_ENGINES
        return known and (
            editor.startswith("django.db.backends.postgresql")
            or editor.startswith("django.contrib.gis.db.backends.postgis")
        )
