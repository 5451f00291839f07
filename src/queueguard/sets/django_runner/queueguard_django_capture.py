# mypy: ignore-errors
# (runs in the project's interpreter, beside its Django: not typed against ours)
"""The capture half of queueguard's Django runner (`__main__.py` beside it): Django's real
`migrate` with a per-migration progress hook, every statement captured through an execute
wrapper on every connection of every thread and at the driver; with `watch`, each statement
of the migration's own connection waits while queueguard reads the session around it.
Standard library and Django only."""

import contextlib
import threading
import time

#: SQLSTATE of lock_timeout
LOCK_NOT_AVAILABLE = "55P03"
#: a migration's id ("app.name") from its node: the graph half's, given by `__main__` when it
#: loads this file (a half of the runner cannot import another)
_key = None


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
        self.post_migrate = True

    # the window of each migration (migrate's progress hook)
    def progress(self, action, migration=None, fake=False):
        if action == "apply_start":
            self.migration = _key((migration.app_label, migration.name))
            self.atomic = bool(migration.atomic)
            self.phase = "migration"
            self._attribute(migration)
            from django.db.migrations import RunPython

            # its Python steps as they run: pre_migrate handlers add some (contenttypes'
            # RenameContentType after a RenameModel)
            python = [
                f"{i + 1}: {type(op).__name__}"
                for i, op in enumerate(migration.operations)
                if isinstance(op, RunPython)
            ]
            self._progress(ev="start", id=self.migration, fake=bool(fake), python=python)
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
        if self.phase == "idle":  # between migrate runs (reading the applied set): not told
            return execute(sql, params, many, context)
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
                self._queries(connection, [command], one=True)
            elif op == "queries":  # several reads in one round trip (observe's pipeline)
                self._queries(connection, command["queries"])
            elif op == "go":  # `then`: reads of the session right after it, in the answer
                started = time.perf_counter()
                try:
                    result = execute(sql, params, many, context)
                except Exception as exc:
                    error = exc
                    self.channel.send(
                        ev="ran",
                        seconds=time.perf_counter() - started,
                        error=f"{type(exc).__name__}: {exc}".strip(),
                        sqlstate=_sqlstate(exc),
                    )
                    continue
                seconds = time.perf_counter() - started
                try:
                    results = self._read(connection, command.get("then") or [])
                except Exception as exc:  # the statement ran: our reading failed
                    self.channel.send(
                        ev="ran", seconds=seconds, read_error=f"{type(exc).__name__}: {exc}"
                    )
                else:
                    self.channel.send(ev="ran", seconds=seconds, results=results)
            elif op == "next":
                break
        if error is not None:
            raise error
        return result

    def _queries(self, connection, queries, one=False):
        """`query` (one: its rows) or `queries` (each one's rows), read and answered."""
        try:
            found = self._read(connection, queries)
            self.channel.send(ev="rows", **({"rows": found[0]} if one else {"results": found}))
        except Exception as exc:
            self.channel.send(ev="rows", error=f"{type(exc).__name__}: {exc}".strip())

    def _read(self, connection, queries):
        """Each query's rows, the queries sent together where the driver can (psycopg 3)."""
        self.local.serving = True
        raw = connection.connection
        try:
            cursors = [raw.cursor() for _ in queries]
            together = hasattr(raw, "pipeline") and len(queries) > 1
            with raw.pipeline() if together else contextlib.nullcontext():
                for n, query in enumerate(queries):
                    cursors[n].execute(query["sql"], query.get("params"))
            answers = []
            for cursor in cursors:
                rows = cursor.fetchall() if cursor.description is not None else []
                answers.append([list(r) for r in rows])
                cursor.close()
            return answers
        finally:
            self.local.serving = False

    # the driver: a statement that did not come through Django's cursor (a raw cursor)
    def raw(self, cursor, query, params):
        busy = getattr(self.local, "wrapped", False) or getattr(self.local, "serving", False)
        if self.phase == "idle" or busy:
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
