"""A Django project written for the benchmarks (`bench.engine.django_speed`): several apps
whose migrations depend on each other, each app's table growing one operation a migration —
foreign keys, rows written by a `RunPython`, new columns, indexes, check and unique
constraints, altered fields, new child tables — with an `atomic = False` migration building
an index concurrently and a hand-written squash of the first app's first three migrations.
Its settings import an application module, as real settings do. Nothing here is copied from
a real project: the generator writes the files.

    write(root, migrations=40, apps=4)   # the project in `root`; DATABASES from BENCH_DB_*
"""

from __future__ import annotations

from pathlib import Path

SETTINGS = """import os

from benchsite import features  # settings that import the application, as real ones do

SECRET_KEY = "bench-only"
USE_TZ = True
INSTALLED_APPS = [
    "django.contrib.contenttypes",
    "django.contrib.auth",
    "django.contrib.postgres",
    {apps}
]
DATABASES = {{
    "default": {{
        "ENGINE": "django.db.backends.postgresql",
        "NAME": os.environ.get("BENCH_DB_NAME", "bench"),
        "HOST": os.environ.get("BENCH_DB_HOST", "localhost"),
        "PORT": os.environ.get("BENCH_DB_PORT", "5432"),
        "USER": os.environ.get("BENCH_DB_USER", "postgres"),
    }}
}}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
FEATURES = features.enabled()
"""

FEATURES = '''"""What the application turns on (imported by the settings)."""

import decimal
import json
import logging
import uuid


def enabled():
    logging.getLogger(__name__).debug("features %s", uuid.uuid4())
    return json.loads(json.dumps({"rounding": str(decimal.ROUND_HALF_EVEN)}))
'''

MANAGE = """#!/usr/bin/env python
import os
import sys

if __name__ == "__main__":
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "benchsite.settings")
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)
"""

HEADER = """from django.db import migrations, models
import django.db.models.deletion
from django.contrib.postgres.operations import AddIndexConcurrently


def fill(apps, schema_editor):
    Item = apps.get_model("{app}", "Item")
    Item.objects.bulk_create([Item(name=f"item {{n}}") for n in range(500)], batch_size=250)


def backfill(apps, schema_editor):
    Item = apps.get_model("{app}", "Item")
    items = list(Item.objects.all())
    for item in items:
        setattr(item, "{field}", item.pk % 7)
    Item.objects.bulk_update(items, ["{field}"], batch_size=250)


"""


def _initial(app: str, index: int, apps: list[str]) -> tuple[list[str], list[str]]:
    """The first migration's operations and its dependencies on other apps."""
    fields = [
        '("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False))',
        '("name", models.CharField(max_length=100))',
        '("created", models.DateTimeField(null=True))',
    ]
    deps: list[str] = []
    if index > 0:
        other = apps[index - 1]
        fields.append(
            f'("parent", models.ForeignKey(null=True, on_delete=django.db.models.deletion.'
            f'SET_NULL, to="{other}.item"))'
        )
        deps.append(f'("{other}", "0001_initial")')
    body = ", ".join(fields)
    return [f'migrations.CreateModel(name="Item", fields=[{body}])'], deps


def _step(app: str, n: int, ints: list[str]) -> tuple[list[str], bool, str | None]:
    """Migration `n` (from 3 on): its operations, whether it is atomic, and the integer
    field a backfill writes (None: no backfill)."""
    kind = n % 8
    last = ints[-1] if ints else None
    if kind == 0 or last is None:
        field = f"qty{n}"
        ints.append(field)
        return (
            [f'migrations.AddField("item", "{field}", models.IntegerField(default=0))'],
            True,
            None,
        )
    if kind == 1:
        index = f"models.Index(fields=['name', '{last}'], name='{app}_i{n}_idx')"
        if n % 16 == 9:  # built concurrently, outside a transaction
            return [f'AddIndexConcurrently("item", {index})'], False, None
        return [f'migrations.AddIndex("item", {index})'], True, None
    if kind == 2:
        check = f"models.CheckConstraint(condition=models.Q({last}__gte=0), name='{app}_c{n}')"
        return [f'migrations.AddConstraint("item", {check})'], True, None
    if kind == 3:
        return (
            [f'migrations.AlterField("item", "name", models.CharField(max_length={100 + n}))'],
            True,
            None,
        )
    if kind == 4:
        return ["migrations.RunPython(backfill, migrations.RunPython.noop)"], True, last
    if kind == 5:
        note = (
            f'migrations.CreateModel(name="Note{n}", fields=[("id", models.BigAutoField('
            'auto_created=True, primary_key=True, serialize=False)), ("body", models.TextField())'
            ', ("item", models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, '
            f'to="{app}.item"))])'
        )
        return [note], True, None
    if kind == 6:
        unique = f"models.UniqueConstraint(fields=['id', '{last}'], name='{app}_u{n}')"
        return [f'migrations.AddConstraint("item", {unique})'], True, None
    field = f"ref{n}"
    return (
        [f'migrations.AddField("item", "{field}", models.CharField(max_length=40, null=True))'],
        True,
        None,
    )


def _file(app: str, name: str, ops: list[str], deps: list[str], atomic: bool, field: str | None,
          replaces: list[str] | None = None) -> str:  # fmt: skip
    lines = [
        HEADER.format(app=app, field=field or "name"),
        "class Migration(migrations.Migration):",
    ]
    if not atomic:
        lines.append("    atomic = False")
    if replaces:
        lines.append(f"    replaces = [{', '.join(replaces)}]")
    lines.append(f"    dependencies = [{', '.join(deps)}]")
    lines.append("    operations = [")
    lines += [f"        {op}," for op in ops]
    lines.append("    ]")
    return "\n".join(lines) + "\n"


def write(root: Path, migrations: int = 40, apps: int = 4) -> list[str]:
    """The project in `root`; the names of its own migrations (`app.name`)."""
    labels = [f"app{chr(ord('a') + i)}" for i in range(apps)]
    (root / "benchsite").mkdir(parents=True, exist_ok=True)
    (root / "benchsite" / "__init__.py").write_text("")
    (root / "benchsite" / "features.py").write_text(FEATURES)
    listed = "\n    ".join(f'"{label}",' for label in labels)
    (root / "benchsite" / "settings.py").write_text(SETTINGS.format(apps=listed))
    (root / "manage.py").write_text(MANAGE)
    names = []
    per_app = [migrations // apps + (1 if i < migrations % apps else 0) for i in range(apps)]
    for index, (app, count) in enumerate(zip(labels, per_app, strict=True)):
        folder = root / app / "migrations"
        folder.mkdir(parents=True, exist_ok=True)
        (root / app / "__init__.py").write_text("")
        (folder / "__init__.py").write_text("")
        ints: list[str] = []
        previous: str | None = None
        kept: list[tuple[str, list[str], list[str]]] = []  # (name, ops, other apps' deps)
        for n in range(1, count + 1):
            if n == 1:
                ops, others = _initial(app, index, labels)
                atomic, field, name = True, None, "0001_initial"
            elif n == 2:
                ops, others, atomic, field = (
                    ["migrations.RunPython(fill, migrations.RunPython.noop)"],
                    [],
                    True,
                    None,
                )
                name = "0002_fill"
            else:
                ops, atomic, field = _step(app, n, ints)
                others, name = [], f"{n:04d}_step"
            deps = [*others] + ([f'("{app}", "{previous}")'] if previous else [])
            (folder / f"{name}.py").write_text(_file(app, name, ops, deps, atomic, field))
            kept.append((name, ops, others))
            names.append(f"{app}.{name}")
            previous = name
        if index == 0 and count >= 3:  # the first three squashed, by hand as Django allows
            squashed = [op for _, ops, _ in kept[:3] for op in ops]
            others = [d for _, _, ds in kept[:3] for d in ds]
            replaces = [f'("{app}", "{name}")' for name, _, _ in kept[:3]]
            name = f"0001_squashed_{kept[2][0]}"
            field = ints[0] if ints else None
            (folder / f"{name}.py").write_text(
                _file(app, name, squashed, others, True, field, replaces)
            )
            names.append(f"{app}.{name}")
    return names
