# mypy: ignore-errors
# (runs in the project's interpreter, beside its Django: not typed against ours)
"""The graph half of queueguard's Django runner (`__main__.py` beside it): what Django knows
of the migrations without running one: every migration on disk in the order `migrate`
applies them, Django's own `migration_plan` for targets, the applied set its recorder reads,
and the rows its fake path would record for a migration queueguard applied (compiled, not
run). Apart from the capture because none of it runs a migration or watches a statement.
Standard library and Django only."""

import sys


def _key(node):
    return f"{node[0]}.{node[1]}"


def _node(key):
    app, _, name = key.partition(".")
    return (app, name)


def _describe(migration, path):
    from django.db.migrations.operations import RunPython

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
                "python": isinstance(op, RunPython),  # a subclass of the project's too
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
    if not connection.get_autocommit():
        connection.rollback()
    channel.send(ev="applied", applied=rows, table=recorder.has_table())


def record(channel, connection, key):
    """Django's fake path for migration `key`, applied by queueguard's online forms: what
    the executor's `record_migration` records (each name a squash replaces, else its own)
    and then, as `migrate` completes a squash all of whose originals are applied, the
    squash. The recorder's INSERT is compiled by Django's ORM and not run here: queueguard
    runs it in the migration's last transaction."""
    from django.db.migrations.loader import MigrationLoader
    from django.db.migrations.recorder import MigrationRecorder
    from django.db.models.sql import InsertQuery

    recorder = MigrationRecorder(connection)
    recorder.ensure_schema()  # as migrate does before its first migration
    loader = MigrationLoader(connection)
    node = _node(key)
    migration = loader.disk_migrations[node]
    names = [tuple(r) for r in migration.replaces] if migration.replaces else [node]
    applied = set(recorder.applied_migrations()) | set(names)
    for squash, replacing in loader.replacements.items():
        if squash not in applied and all(tuple(r) in applied for r in replacing.replaces):
            names.append(squash)
            applied.add(squash)
    model = recorder.Migration
    fields = [f for f in model._meta.concrete_fields if not f.primary_key]
    statements = []
    for app, name in names:  # one INSERT a name, as record_applied writes it
        query = InsertQuery(model)
        query.insert_values(fields, [model(app=app, name=name)])
        for sql, params in query.get_compiler(connection=connection).as_sql():
            statements.append([sql, [_aware(value) for value in params]])
    channel.send(ev="record", statements=statements, names=[_key(n) for n in names])


def _aware(value):
    """A datetime as text with its offset: a naive one (USE_TZ = False) in the process's time
    zone, which Django set to TIME_ZONE, as its connection would read it."""
    if hasattr(value, "tzinfo") and hasattr(value, "isoformat") and hasattr(value, "hour"):
        return (value if value.tzinfo is not None else value.astimezone()).isoformat()
    return value
