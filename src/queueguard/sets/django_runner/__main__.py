# mypy: ignore-errors
# (runs in the project's interpreter, beside its Django: not typed against ours)
"""queueguard's runner inside a Django project: this folder run by path with the project's own
interpreter (`--python`), the project's folder as working directory. It (and its halves
beside it, loaded by path: `queueguard_django_connection.py`, the settings and the
connection; `queueguard_django_graph.py`, the graph, plans and the applied set;
`queueguard_django_capture.py` and `queueguard_django_hooks.py`, the statements of a run)
imports only the standard library and Django, and speaks JSON lines with queueguard on two
file descriptors of its own (commands in, events out); the project's prints and logging go
to stderr.

Not imported by queueguard (which never imports Django): `sets.django_process` starts it.

Commands (one JSON object a line, each answered by events):
- setup: the settings module, the alias, the connection fields that replace those of
  `DATABASES[alias]` (NAME, USER, PASSWORD, HOST, PORT, libpq keys of OPTIONS; ENGINE and
  Django's own OPTIONS stay), the `application_name` nonce queueguard looks for on the server,
  whether the connection is read only; every other alias points at an address that refuses
  connections. Answers the project's facts (Django's version, the backend, the migrate
  command's module) and the backend pid of a first connection.
- graph: every migration on disk, in the order `migrate` applies them to an empty database.
- applied: what `django_migrations` holds, read by Django's recorder.
- plan: Django's own `migration_plan` for targets (default: every app's leaves), from the
  database's applied set or a given one.
- migrate: Django's real `migrate` (a subclass whose progress hook opens and closes each
  migration's window), every statement captured through an execute wrapper on every
  connection of every thread and at the driver (psycopg's cursors); with `watch`, each
  statement of the migration's own connection waits for queueguard to read the session
  around it (`query` ... `go` ... `next`).
- record: the statements Django's fake path would run for one migration queueguard applied
  in online forms (the recorder's INSERT, compiled, not run).
"""

from __future__ import annotations

import argparse
import decimal
import importlib
import importlib.util
import json
import os
import sys
import threading
import traceback

# Run by path, this folder is first on sys.path: taken off, so nothing of ours shadows a
# module of the project's (or `import django` itself).
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]


class Channel:
    def __init__(self, commands: int, events: int) -> None:
        self.reader = os.fdopen(commands, "r", encoding="utf-8")
        self.writer = os.fdopen(events, "w", encoding="utf-8")
        self.lock = threading.Lock()

    def send(self, **message):
        with self.lock:
            self.writer.write(json.dumps(message, default=_plain) + "\n")
            self.writer.flush()

    def receive(self):
        line = self.reader.readline()
        if not line:  # queueguard is gone
            os._exit(3)
        return json.loads(line)


def _plain(value):
    if isinstance(value, decimal.Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, (bytes, memoryview)):
        return bytes(value).hex()
    return str(value)


def _beside(name, **given):
    """A half of the runner beside this file (loaded by path: this folder is not searched),
    `given` what it takes from another half (it cannot import one)."""
    spec = importlib.util.spec_from_file_location(name, os.path.join(_HERE, f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for attribute, value in given.items():
        setattr(module, attribute, value)
    return module


_graph = _beside("queueguard_django_graph")
_capture = _beside("queueguard_django_capture", _key=_graph._key)
_hooks = _beside("queueguard_django_hooks")
_connection = _beside("queueguard_django_connection")
setup, retarget, _quit = _connection.setup, _connection.retarget, _connection.quit
_GIVEN, _reconfigure = _connection.GIVEN, _connection.reconfigure
graph, plan, applied, _node = _graph.graph, _graph.plan, _graph.applied, _graph._node
_sqlstate = _capture._sqlstate


def migrate(channel, message, alias, reconfigure):
    """Django's migrate (the project's own command class when allowed), every statement
    told by the capture (`queueguard_django_capture.py`)."""
    from django.core.management import call_command
    from django.core.management.commands import migrate as migrate_module
    from django.db import connections

    if message.get("settings"):
        reconfigure(message["settings"])
    capture = _hooks._CAPTURE.get("capture")
    if capture is None:  # installed once a process: a retried migrate reuses it
        capture = _hooks._CAPTURE["capture"] = _capture.Capture(channel, alias, False, {})
        _hooks._install(capture, migrate_module)
    capture.watch = bool(message.get("watch"))
    capture.ladder = message.get("ladder") or {}
    capture.post_migrate = message.get("post_migrate", True)
    capture.migration, capture.op, capture.phase = None, None, "setup"
    command_class = _migrate_class(message.get("allow_custom"))

    class Command(command_class):
        def migration_progress_callback(self, action, migration=None, fake=False):
            capture.progress(action, migration, fake)
            return super().migration_progress_callback(action, migration, fake)

    try:
        # no target: every app's leaves, as plain `migrate`; else `migrate app name` each
        targets = _as_one_run(message.get("targets") or [], connections[alias])
        for target in targets or [None]:
            call_command(
                Command(),
                *(list(_node(target)) if target else []),
                database=alias,
                interactive=False,
                verbosity=0,
                skip_checks=True,
                fake=bool(message.get("fake")),
            )
        channel.send(ev="done")
    except BaseException as exc:
        channel.send(
            ev="failed",
            migration=capture.migration,
            error=f"{type(exc).__name__}: {exc}".strip(),
            sqlstate=_sqlstate(exc),
            trace=traceback.format_exc(limit=8),
        )
    finally:
        capture.phase = "idle"
        for name in connections:
            connections[name].close()


def _as_one_run(targets, connection):
    """The `migrate app name` runs that apply `targets`: none when they plan what every
    app's leaves plan (one plain `migrate`), else the targets no other target's plan already
    reaches (`migrate blog 0003` applies the other apps' migrations it depends on, as
    `manage.py migrate blog 0003` does). Each run builds the project's state and sends
    post_migrate again: eight apps' leaves one by one took four times the plain run, and
    post_migrate between them created permissions a later model rename left behind."""
    if len(targets) < 2:
        return targets
    from django.db.migrations.executor import MigrationExecutor

    executor = MigrationExecutor(connection)
    graph = executor.loader.graph
    try:
        nodes = [_node(t) for t in targets]
        wanted = executor.migration_plan(nodes)
        reached = {n for node in nodes for n in graph.forwards_plan(node) if n != node}
    except Exception:  # a squash left out of the graph: `migrate app name` resolves it
        return targets
    everything = executor.migration_plan(graph.leaf_nodes())
    if set(wanted) == set(everything):  # the same migrations: Django's own order in one run
        return []
    return [t for i, t in enumerate(targets) if nodes[i] not in reached]


def _migrate_class(allow_custom):
    """The project's own `migrate` command when it has one and queueguard is allowed to drive
    it; else Django's."""
    from django.core.management import get_commands, load_command_class

    app = get_commands().get("migrate")
    if allow_custom and isinstance(app, str) and app != "django.core":
        return type(load_command_class(app, "migrate"))
    return importlib.import_module("django.core.management.commands.migrate").Command


def _preload():
    """Django's own modules imported while queueguard starts, its PostgreSQL backend (and so
    the driver it finds) last: none of the project's code and no settings (those come with
    `setup`). A module that cannot import yet (no Django here, a driver the settings make
    importable) is left to `setup`, which imports it again as `migrate` would."""
    for module in (
        "django.db.models",
        "django.db.migrations.executor",
        "django.db.migrations.autodetector",
        "django.core.management.commands.migrate",
        "django.db.backends.postgresql.base",
    ):
        try:
            importlib.import_module(module)
        except Exception:  # said by setup, in its turn
            return


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--commands", type=int, required=True)
    parser.add_argument("--events", type=int, required=True)
    args = parser.parse_args()
    channel = Channel(args.commands, args.events)
    os.dup2(2, 1)  # the project's prints go to stderr, shown with their migration
    sys.stdout = sys.stderr
    _preload()
    alias = None
    while True:
        message = channel.receive()
        op = message.get("op")
        try:
            if op == "setup":
                alias = message["alias"]
                setup(channel, message)
            elif op == "retarget":
                retarget(channel, message)
            elif op == "graph":
                graph(channel)
            elif op == "applied":
                from django.db import connections

                applied(channel, connections[alias])
            elif op == "plan":
                from django.db import connections

                plan(channel, connections[alias], message)
            elif op == "migrate":
                migrate(channel, message, _GIVEN["alias"], _reconfigure)
            elif op == "record":  # Django's fake path, compiled (`upgrade --online`)
                from django.db import connections

                _graph.record(channel, connections[alias], message["id"])
            elif op == "quit":
                _quit(channel)
                return
            else:
                channel.send(ev="error", error=f"unknown command {op!r}")
        except BaseException as exc:  # a SystemExit from the project included
            channel.send(
                ev="error",
                error=f"{type(exc).__name__}: {exc}".strip(),
                sqlstate=_sqlstate(exc),
                trace=traceback.format_exc(limit=8),
            )
            if op == "setup":
                return


if __name__ == "__main__":
    main()
