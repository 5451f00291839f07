# mypy: ignore-errors
# (runs in the project's interpreter, beside its Django: not typed against ours)
"""queueguard's runner inside a Django project: run by path with the project's own interpreter
(`--python`), the project's folder as working directory. It imports only the standard library
and Django, and speaks JSON lines with queueguard on two file descriptors of its own (commands
in, events out); the project's prints and logging go to stderr.

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
"""

from __future__ import annotations

import argparse
import decimal
import importlib
import json
import os
import sys
import threading
import time
import traceback

# Run by path, this file's folder is first on sys.path, and it holds queueguard's adapter
# named `django`: taken off, so `import django` finds the project's Django.
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]

#: where an alias that must not be reached points (a socket directory that does not exist:
#: a connection fails at once, loudly)
REFUSED_HOST = "/nonexistent/queueguard-refused"
#: SQLSTATE of lock_timeout
LOCK_NOT_AVAILABLE = "55P03"
#: the project's own libpq `options` of each DATABASES entry, kept across overrides
_OWN_OPTIONS = {}
#: the setup message, for a later change of the session's settings (a longer lock_timeout)
_GIVEN = {}


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


# --- settings ----------------------------------------------------------------------------


def _override(databases, alias, given):
    """The connection fields of DATABASES[alias] replaced by the target's, in place (the
    connection handler may hold this very dict); every other alias refused."""
    if alias not in databases:
        raise SystemExit(f"DATABASES has no alias {alias!r} (it has {sorted(databases)})")
    entry = databases[alias]
    for key in ("NAME", "USER", "PASSWORD", "HOST", "PORT"):
        entry[key] = given["fields"].get(key, "")
    options = entry.setdefault("OPTIONS", {})
    own = _OWN_OPTIONS.setdefault(id(entry), options.get("options", ""))
    libpq = dict(given["libpq"])
    dsn_options = libpq.pop("options", "")
    options.update(libpq)
    extra = " ".join(f"-c {k}={v}" for k, v in given["settings"].items())
    joined = f"{own} {dsn_options} {extra}"
    options["options"] = " ".join(joined.split())
    options["application_name"] = given["nonce"]
    for other, entry_other in databases.items():
        if other != alias:
            entry_other["HOST"] = REFUSED_HOST
            entry_other["PORT"] = ""


def _reconfigure(settings_changed):
    """The session settings of the next connections changed (every open one is closed)."""
    from django.conf import settings
    from django.db import connections

    _GIVEN["settings"] = {**_GIVEN["settings"], **settings_changed}
    _override(settings.DATABASES, _GIVEN["alias"], _GIVEN)
    _override(connections.settings, _GIVEN["alias"], _GIVEN)
    connections.close_all()


def setup(channel, message):
    _GIVEN.update(message)
    os.environ["DJANGO_SETTINGS_MODULE"] = message["module"]
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    from django.conf import settings

    _override(settings.DATABASES, message["alias"], message)
    import django

    django.setup()
    from django.db import connections

    # a settings module that computes DATABASES late (in an app's ready()) or a connection
    # opened at import: override again wherever the handler reads, and reconnect
    _override(settings.DATABASES, message["alias"], message)
    _override(connections.settings, message["alias"], message)
    connections.close_all()
    connection = connections[message["alias"]]
    from django.core.management import get_commands

    migrate_app = get_commands().get("migrate")
    pid = None
    if message.get("connect") and connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            pid = cursor.fetchone()[0]
    channel.send(
        ev="ready",
        django=django.get_version(),
        engine=connection.settings_dict["ENGINE"],
        vendor=connection.vendor,
        editor=f"{connection.SchemaEditorClass.__module__}.{connection.SchemaEditorClass.__name__}",
        migrate=migrate_app if isinstance(migrate_app, str) else type(migrate_app).__module__,
        pid=pid,
        aliases=sorted(connections.settings),
    )


# --- the graph ---------------------------------------------------------------------------


def _key(node):
    return f"{node[0]}.{node[1]}"


def _node(key):
    app, _, name = key.partition(".")
    return (app, name)


def _describe(migration, path):
    ops = []
    for op in migration.operations:
        kind = type(op).__name__
        ops.append(
            {
                "kind": kind,
                "module": type(op).__module__,
                "describe": _safe(op.describe),
                "reduces_to_sql": bool(getattr(op, "reduces_to_sql", True)),
                "atomic": getattr(op, "atomic", None),
                "python": kind == "RunPython",
            }
        )
    return {
        "id": _key((migration.app_label, migration.name)),
        "app": migration.app_label,
        "name": migration.name,
        "atomic": bool(migration.atomic),
        "initial": bool(getattr(migration, "initial", False)),
        "replaces": [_key(r) for r in (migration.replaces or [])],
        "dependencies": [_key(d) for d in migration.dependencies if d[1] != "__first__"],
        "path": path,
        "operations": ops,
    }


def _safe(fn):
    try:
        return str(fn())
    except Exception as exc:  # a third-party operation's describe() may need state
        return f"({type(exc).__name__})"


def _path(migration):
    module = sys.modules.get(type(migration).__module__)
    return getattr(module, "__file__", None)


def graph(channel):
    from django.db.migrations.loader import MigrationLoader

    loader = MigrationLoader(None, ignore_no_migrations=True)
    ordered = []
    for node in _forward_plan(loader, loader.graph.leaf_nodes()):
        ordered.append(node)
    every = []
    seen = set()
    for node in ordered:
        migration = loader.graph.nodes[node]
        for replaced in migration.replaces or []:  # the originals, before their squash
            if tuple(replaced) in loader.disk_migrations and tuple(replaced) not in seen:
                seen.add(tuple(replaced))
                every.append(tuple(replaced))
        seen.add(node)
        every.append(node)
    for node in sorted(loader.disk_migrations):  # a squash's originals are kept on disk too
        if node not in seen:
            every.append(node)
    migrations = [
        _describe(loader.disk_migrations[n], _path(loader.disk_migrations[n])) for n in every
    ]
    channel.send(
        ev="graph",
        migrations=migrations,
        order=[_key(n) for n in ordered],
        leaves=[_key(n) for n in loader.graph.leaf_nodes()],
    )


def _forward_plan(loader, targets):
    seen, plan = set(), []
    for target in targets:
        for node in loader.graph.forwards_plan(target):
            if node not in seen:
                seen.add(node)
                plan.append(node)
    return plan


class _GivenRecorder:
    """MigrationRecorder's read for a loader asked about an applied set it is given."""

    given = ()

    def __init__(self, connection):
        pass

    def applied_migrations(self):
        return {_node(k): None for k in self.given}


def _loader(connection, applied):
    from django.db.migrations import loader as loader_module

    if applied is None:
        return loader_module.MigrationLoader(connection)
    real = loader_module.MigrationRecorder
    _GivenRecorder.given = tuple(applied)
    loader_module.MigrationRecorder = _GivenRecorder
    try:
        return loader_module.MigrationLoader(connection or object())
    finally:
        loader_module.MigrationRecorder = real


def _targets(loader, targets):
    if not targets:
        return loader.graph.leaf_nodes()
    found = []
    for key in targets:
        node = _node(key)
        if node[1] == "zero":
            found.append((node[0], None))
            continue
        if node not in loader.graph.nodes and node in loader.replacements:
            # as `migrate` does: a squash left out of the graph (some of its originals are
            # applied) stands for the last migration it replaces
            node = tuple(loader.replacements[node].replaces[-1])
        if node not in loader.graph.nodes:
            raise SystemExit(f"Django cannot migrate to {key}: no such node in the graph")
        found.append(node)
    return found


def plan(channel, connection, message):
    from django.db.migrations.executor import MigrationExecutor

    executor = MigrationExecutor(None)
    executor.connection = connection
    executor.loader = _loader(
        connection if message.get("applied") is None else None, message.get("applied")
    )
    steps = executor.migration_plan(_targets(executor.loader, message.get("targets")))
    channel.send(
        ev="plan",
        steps=[{"id": _key((m.app_label, m.name)), "backwards": bool(b)} for m, b in steps],
        applied=sorted(_key(k) for k in executor.loader.applied_migrations),
    )


def applied(channel, connection):
    from django.db.migrations.recorder import MigrationRecorder

    recorder = MigrationRecorder(connection)
    rows = sorted(_key(k) for k in recorder.applied_migrations()) if recorder.has_table() else []
    connection.rollback() if not connection.get_autocommit() else None
    channel.send(ev="applied", applied=rows, table=recorder.has_table())


# --- capture -----------------------------------------------------------------------------


class Capture:
    """Every statement the run sends, told where it came from; `watch`: each statement of the
    migration's own connection waits while queueguard reads the session around it."""

    def __init__(self, channel, alias, watch, ladder):
        self.channel = channel
        self.alias = alias
        self.watch = watch
        self.ladder = ladder  # {"timeouts": [ms, ...], "pause_s": s} for in-place retries
        self.migration = None
        self.atomic = True
        self.op = None
        self.phase = "setup"
        self.main = threading.get_ident()
        self.local = threading.local()
        self.seq = 0

    # the window of each migration (migrate's progress hook)
    def progress(self, action, migration=None, fake=False):
        if action == "apply_start":
            self.migration = _key((migration.app_label, migration.name))
            self.atomic = bool(migration.atomic)
            self.phase = "migration"
            self._attribute(migration)
            self._progress(ev="start", id=self.migration, fake=bool(fake))
        elif action == "apply_success":
            self._progress(ev="applied", id=self.migration, fake=bool(fake))
            self.migration, self.op, self.phase = None, None, "between"
        elif action == "unapply_start":
            raise RuntimeError("queueguard never unapplies a migration")

    def _progress(self, **event):
        """A migration's start or end; watched, the runner waits while queueguard reads the
        catalog from outside."""
        self.channel.send(**event)
        if self.watch:
            while self.channel.receive().get("op") != "next":
                pass

    def _attribute(self, migration):
        capture = self
        last = len(migration.operations) - 1
        for index, op in enumerate(migration.operations):
            original = op.database_forwards
            label = f"{index + 1}: {type(op).__name__}"

            def forwards(
                app_label,
                schema_editor,
                from_state,
                to_state,
                _o=original,
                _l=label,
                _i=index,
                _op=op,
            ):
                capture.op = _l
                try:
                    return capture._run_op(_op, _o, app_label, schema_editor, from_state, to_state)
                finally:
                    capture.op = "deferred SQL" if _i == last else None

            op.database_forwards = forwards
        if not migration.operations:
            self.op = "deferred SQL"

    def _run_op(self, op, original, app_label, editor, from_state, to_state):
        """An operation; one that runs in an atomic block of its own inside a migration that
        does not (RunPython(atomic=True) in an `atomic = False` migration) is run again after
        a lock timeout, its block having rolled back."""
        own_block = not self.atomic and getattr(op, "atomic", False)
        for attempt, timeout in enumerate([None, *self.ladder.get("timeouts", [])]):
            try:
                if timeout is not None:
                    self._set_lock_timeout(editor.connection, timeout)
                return original(app_label, editor, from_state, to_state)
            except Exception as exc:
                if not (own_block and _sqlstate(exc) == LOCK_NOT_AVAILABLE):
                    raise
                if attempt == len(self.ladder.get("timeouts", [])):
                    raise
                self.channel.send(
                    ev="retry", id=self.migration, what=self.op, timeout=timeout, scope="operation"
                )
                time.sleep(self.ladder.get("pause_s", 0.5) * (attempt + 1))
        return None

    def _set_lock_timeout(self, connection, ms):
        self.local.serving = True
        try:
            with connection.connection.cursor() as cursor:
                cursor.execute(f"SET lock_timeout = {int(ms)}")
        finally:
            self.local.serving = False

    def origin(self, sql):
        text = sql if isinstance(sql, str) else str(sql)
        if '"django_migrations"' in text or " django_migrations" in text:
            return "bookkeeping"
        if self.phase != "migration":
            return self.phase
        return self.op or "migration"

    # Django's execute wrapper (every connection of every thread)
    def wrapper(self, execute, sql, params, many, context):
        connection = context["connection"]
        self.local.wrapped = True
        try:
            return self._statement(execute, sql, params, many, context, connection)
        finally:
            self.local.wrapped = False

    def _statement(self, execute, sql, params, many, context, connection):
        other = threading.get_ident() != self.main or connection.alias != self.alias
        origin = self.origin(sql)
        event = {
            "migration": self.migration,
            "origin": origin,
            "sql": _text(connection, sql, params, many),
            "transaction": bool(connection.in_atomic_block),
            "thread": "other" if threading.get_ident() != self.main else "main",
            "alias": connection.alias,
            "via": "django",
        }
        self.seq += 1
        event["seq"] = self.seq
        watched = (
            self.watch and not other and self.migration is not None and origin != "bookkeeping"
        )
        if not watched:
            started = time.perf_counter()
            try:
                return self._retrying(execute, sql, params, many, context, connection, event)
            finally:
                event["seconds"] = time.perf_counter() - started
                self.channel.send(ev="stmt", **event)
        return self._served(execute, sql, params, many, context, connection, event)

    def _retrying(self, execute, sql, params, many, context, connection, event):
        """A statement in autocommit (an `atomic = False` migration) is retried in place on a
        lock timeout, what ran before it staying committed; a concurrent build's leftover
        INVALID index is dropped first. Not a RunPython's statement: its code around the
        statement is not run again."""
        timeouts = self.ladder.get("timeouts", [])
        in_place = (
            self.migration is not None
            and not connection.in_atomic_block
            and not (self.op or "").endswith("RunPython")
        )
        if in_place:
            self._drop_invalid(connection, event["sql"])
        for attempt in range(len(timeouts) + 1):
            try:
                return execute(sql, params, many, context)
            except Exception as exc:
                if not in_place or _sqlstate(exc) != LOCK_NOT_AVAILABLE or attempt == len(timeouts):
                    event["error"] = f"{type(exc).__name__}: {exc}".strip()
                    event["sqlstate"] = _sqlstate(exc)
                    raise
                self.channel.send(
                    ev="retry",
                    id=self.migration,
                    what=event["sql"][:200],
                    timeout=timeouts[attempt],
                    scope="statement",
                )
                time.sleep(self.ladder.get("pause_s", 0.5) * (attempt + 1))
                self._set_lock_timeout(connection, timeouts[attempt])
                self._drop_invalid(connection, event["sql"])
        return None

    def _drop_invalid(self, connection, sql):
        name = _concurrent_index(sql)
        if name is None:
            return
        self.local.serving = True
        try:
            with connection.connection.cursor() as cursor:
                cursor.execute(
                    "SELECT i.indexrelid::regclass::text FROM pg_index i JOIN pg_class c "
                    "ON c.oid = i.indexrelid WHERE c.relname = %s "
                    "AND c.relnamespace = ANY (current_schemas(false)::regnamespace[]) "
                    "AND NOT i.indisvalid",
                    (name,),
                )
                row = cursor.fetchone()
                if row:
                    cursor.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {row[0]}")
                    self.channel.send(ev="dropped_invalid", id=self.migration, index=row[0])
        finally:
            self.local.serving = False

    def _served(self, execute, sql, params, many, context, connection, event):
        event["autocommit"] = not connection.in_atomic_block
        event["pid"] = _pid(connection)
        self.channel.send(ev="watch", **event)
        result, error = None, None
        while True:
            command = self.channel.receive()
            op = command["op"]
            if op == "query":
                self._query(connection, command)
            elif op == "go":
                started = time.perf_counter()
                try:
                    result = execute(sql, params, many, context)
                    self.channel.send(ev="ran", seconds=time.perf_counter() - started)
                except Exception as exc:
                    error = exc
                    self.channel.send(
                        ev="ran",
                        seconds=time.perf_counter() - started,
                        error=f"{type(exc).__name__}: {exc}".strip(),
                        sqlstate=_sqlstate(exc),
                    )
            elif op == "next":
                break
        if error is not None:
            raise error
        return result

    def _query(self, connection, command):
        self.local.serving = True
        try:
            with connection.connection.cursor() as cursor:
                cursor.execute(command["sql"], command.get("params"))
                rows = cursor.fetchall() if cursor.description is not None else []
            self.channel.send(ev="rows", rows=[list(r) for r in rows])
        except Exception as exc:
            self.channel.send(ev="rows", error=f"{type(exc).__name__}: {exc}".strip())
        finally:
            self.local.serving = False

    # the driver: a statement that did not come through Django's cursor (a raw cursor)
    def raw(self, cursor, query, params):
        if getattr(self.local, "wrapped", False) or getattr(self.local, "serving", False):
            return
        self.seq += 1
        self.channel.send(
            ev="stmt",
            seq=self.seq,
            migration=self.migration,
            origin=self.origin(query) if self.migration else self.phase,
            sql=_as_text(query),
            transaction=None,
            thread="other" if threading.get_ident() != self.main else "main",
            alias=None,
            via="driver",
        )


def _as_text(query):
    if isinstance(query, bytes):
        return query.decode("utf-8", "replace")
    if isinstance(query, str):
        return query
    try:
        return query.as_string(None)
    except Exception:
        return str(query)


def _text(connection, sql, params, many):
    """The statement with its parameters inlined as the driver sends them (DDL arrives with
    none: Django merges them on the client)."""
    if not params or many:
        return _as_text(sql)
    try:
        with connection.connection.cursor() as cursor:
            mogrify = getattr(cursor, "mogrify", None)
            if mogrify is not None:
                text = mogrify(sql, params)
                return text.decode() if isinstance(text, bytes) else text
    except Exception:
        pass
    return _as_text(sql)


def _pid(connection):
    raw = connection.connection
    info = getattr(raw, "info", None)  # psycopg 3
    return info.backend_pid if info is not None else raw.get_backend_pid()


def _sqlstate(exc):
    seen = exc
    while seen is not None:
        code = getattr(seen, "sqlstate", None) or getattr(seen, "pgcode", None)
        if code:
            return code
        seen = seen.__cause__ or seen.__context__
    return None


def _concurrent_index(sql):
    words = sql.replace('"', " ").split()
    upper = [w.upper() for w in words]
    if "CONCURRENTLY" not in upper or "CREATE" not in upper[:1] or "INDEX" not in upper[:4]:
        return None
    at = upper.index("CONCURRENTLY") + 1
    if upper[at : at + 3] == ["IF", "NOT", "EXISTS"]:
        at += 3
    return words[at] if at < len(words) and upper[at] != "ON" else None


def _tap_drivers(capture):
    """Every psycopg (3) cursor's execute reports to `capture.raw` (a raw cursor included);
    psycopg2's, through the cursor factory of every connection it opens."""
    try:
        import psycopg
    except ImportError:
        psycopg = None
    if psycopg is not None:
        for cls in (psycopg.Cursor,):
            original = cls.execute
            original_many = cls.executemany

            def execute(self, query, params=None, *a, _o=original, **kw):
                capture.raw(self, query, params)
                return _o(self, query, params, *a, **kw)

            def executemany(self, query, params_seq, *a, _o=original_many, **kw):
                capture.raw(self, query, None)
                return _o(self, query, params_seq, *a, **kw)

            cls.execute = execute
            cls.executemany = executemany
    try:
        import psycopg2
        import psycopg2.extensions
    except ImportError:
        return

    class Tapped(psycopg2.extensions.cursor):
        def execute(self, query, vars=None):
            capture.raw(self, query, vars)
            return super().execute(query, vars)

        def executemany(self, query, vars_list):
            capture.raw(self, query, None)
            return super().executemany(query, vars_list)

    connect = psycopg2.connect

    def tapped_connect(*a, **kw):
        kw.setdefault("cursor_factory", Tapped)
        return connect(*a, **kw)

    psycopg2.connect = tapped_connect


_CAPTURE = {}


def _install(capture, migrate_module):
    """The execute wrapper on every connection (those to come too), the driver's tap, and
    the pre/post_migrate phases."""
    from django.db import connections
    from django.db.backends.signals import connection_created

    installed = set()

    def install(sender=None, connection=None, **_kw):
        if id(connection) not in installed:
            installed.add(id(connection))
            connection.execute_wrappers.append(capture.wrapper)

    connection_created.connect(install, weak=False)
    for name in connections:
        install(connection=connections[name])
    _tap_drivers(capture)
    pre, post = migrate_module.emit_pre_migrate_signal, migrate_module.emit_post_migrate_signal

    def emit_pre(*a, **kw):
        capture.phase = "pre_migrate"
        try:
            return pre(*a, **kw)
        finally:
            capture.phase = "setup"

    def emit_post(*a, **kw):
        capture.phase = "post_migrate"
        try:
            return post(*a, **kw)
        finally:
            capture.phase = "after"

    migrate_module.emit_pre_migrate_signal = emit_pre
    migrate_module.emit_post_migrate_signal = emit_post


def migrate(channel, message):
    from django.core.management import call_command
    from django.core.management.commands import migrate as migrate_module
    from django.db import connections

    alias = _GIVEN["alias"]
    if message.get("settings"):
        _reconfigure(message["settings"])
    capture = _CAPTURE.get("capture")
    if capture is None:  # installed once a process: a retried migrate reuses it
        capture = _CAPTURE["capture"] = Capture(channel, alias, False, {})
        _install(capture, migrate_module)
    capture.watch = bool(message.get("watch"))
    capture.ladder = message.get("ladder") or {}
    capture.migration, capture.op, capture.phase = None, None, "setup"
    command_class = _migrate_class(message.get("allow_custom"))

    class Command(command_class):
        def migration_progress_callback(self, action, migration=None, fake=False):
            capture.progress(action, migration, fake)
            return super().migration_progress_callback(action, migration, fake)

    try:
        # no target: every app's leaves, as plain `migrate`; else `migrate app name` each
        for target in message.get("targets") or [None]:
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
        for name in connections:
            connections[name].close()


def _migrate_class(allow_custom):
    """The project's own `migrate` command when it has one and queueguard is allowed to drive
    it; else Django's."""
    from django.core.management import get_commands, load_command_class

    app = get_commands().get("migrate")
    if allow_custom and isinstance(app, str) and app != "django.core":
        return type(load_command_class(app, "migrate"))
    return importlib.import_module("django.core.management.commands.migrate").Command


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--commands", type=int, required=True)
    parser.add_argument("--events", type=int, required=True)
    args = parser.parse_args()
    channel = Channel(args.commands, args.events)
    os.dup2(2, 1)  # the project's prints go to stderr, shown with their migration
    sys.stdout = sys.stderr
    alias = None
    while True:
        message = channel.receive()
        op = message.get("op")
        try:
            if op == "setup":
                alias = message["alias"]
                setup(channel, message)
            elif op == "graph":
                graph(channel)
            elif op == "applied":
                from django.db import connections

                applied(channel, connections[alias])
            elif op == "plan":
                from django.db import connections

                plan(channel, connections[alias], message)
            elif op == "migrate":
                migrate(channel, message)
            elif op == "quit":
                channel.send(ev="bye")
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
