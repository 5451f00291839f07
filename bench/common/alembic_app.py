"""An Alembic project written for the benchmark (bench/engine/alembic_speed.py): an
application whose env.py imports the application — its ORM models, one class per table, and
the heavy libraries it uses (hypothesis, jsonschema, sqlglot: about a second of imports, as
an application's own) — and `revisions` revisions of the kinds real projects ship: tables
with foreign keys, new columns, indexes (one built concurrently in `autocommit_block()`),
unique constraints, data migrations, and a branch for another dialect that sends nothing on
PostgreSQL.
"""

from __future__ import annotations

from pathlib import Path

#: the kinds of revision, in turn (the first revision creates `account` and its rows)
KINDS = ("table", "column", "index", "data", "unique", "other_dialect", "concurrent_index")

ENV = '''"""The application's env.py: Alembic's generic one, importing the application."""

from logging.config import fileConfig

from alembic import context
from sqlalchemy import engine_from_config, pool

from benchapp.models import Base

config = context.config
if config.config_file_name is not None:
    fileConfig(config.config_file_name, disable_existing_loggers=False)
target_metadata = Base.metadata

if context.is_offline_mode():
    context.configure(url=config.get_main_option("sqlalchemy.url"), literal_binds=True,
                      target_metadata=target_metadata)
    with context.begin_transaction():
        context.run_migrations()
else:
    engine = engine_from_config(config.get_section(config.config_ini_section, {}),
                                prefix="sqlalchemy.", poolclass=pool.NullPool)
    with engine.connect() as connection:
        context.configure(connection=connection, target_metadata=target_metadata)
        with context.begin_transaction():
            context.run_migrations()
'''

INI = """[alembic]
script_location = %(here)s/migrations
prepend_sys_path = .
path_separator = os
sqlalchemy.url = {url}

[loggers]
keys = root

[handlers]
keys = console

[formatters]
keys = generic

[logger_root]
level = WARNING
handlers = console

[handler_console]
class = StreamHandler
args = (sys.stderr,)
level = NOTSET
formatter = generic

[formatter_generic]
format = %(levelname)-5.5s [%(name)s] %(message)s
"""


def _models(count: int) -> str:
    lines = [
        '"""The application\'s models (and the libraries it imports)."""',
        "",
        "import hypothesis  # noqa: F401  (the application's own heavy imports)",
        "import jsonschema  # noqa: F401",
        "import sqlglot  # noqa: F401",
        "import sqlalchemy as sa",
        "from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship",
        "",
        "",
        "class Base(DeclarativeBase):",
        "    pass",
        "",
        "",
        "class Account(Base):",
        '    __tablename__ = "account"',
        "    id: Mapped[int] = mapped_column(primary_key=True)",
        "    email: Mapped[str]",
        "",
    ]
    for n in range(count):
        lines += [
            "",
            f"class Thing{n}(Base):",
            f'    __tablename__ = "thing_{n}"',
            "    id: Mapped[int] = mapped_column(primary_key=True)",
            '    account_id: Mapped[int] = mapped_column(sa.ForeignKey("account.id"))',
            "    note: Mapped[str | None]",
            "    account: Mapped[Account] = relationship()",
            "",
        ]
    return "\n".join(lines)


def _upgrade(n: int, kind: str, tables: int) -> str:
    """The body of revision n's upgrade(), of `kind`, on table thing_{tables - 1}."""
    last = f"thing_{tables - 1}"
    if kind == "table":
        return (
            f'op.create_table("thing_{tables}", sa.Column("id", sa.Integer, primary_key=True),\n'
            '        sa.Column("account_id", sa.Integer, sa.ForeignKey("account.id")),\n'
            '        sa.Column("note", sa.Text))\n'
            f'    op.execute("INSERT INTO thing_{tables} (account_id, note) '
            'SELECT id, email FROM account")'
        )
    if kind == "column":
        return f'op.add_column("account", sa.Column("c{n}", sa.Text))'
    if kind == "index":
        return f'op.create_index("ix_{last}_note_{n}", "{last}", ["note"])'
    if kind == "data":
        return (
            "bind = op.get_bind()\n"
            f'    query = sa.text("SELECT id FROM {last} ORDER BY id LIMIT 20")\n'
            "    rows = bind.execute(query).all()\n"
            "    for (id_,) in rows:\n"
            f'        bind.execute(sa.text("UPDATE {last} SET note = :n WHERE id = :id"),\n'
            '                     {"n": f"row {id_}", "id": id_})'
        )
    if kind == "unique":
        return f'op.create_unique_constraint("uq_{last}_{n}", "{last}", ["id", "note"])'
    if kind == "other_dialect":
        return (
            'if op.get_bind().dialect.name == "mssql":\n'
            f'        op.execute("ALTER TABLE {last} ALTER COLUMN note NVARCHAR(400)")'
        )
    return (
        "with op.get_context().autocommit_block():\n"
        f'        op.create_index("ix_{last}_account_{n}", "{last}", ["account_id"],\n'
        "                        postgresql_concurrently=True)"
    )


def write(folder: Path, revisions: int, *, url: str) -> int:
    """Write the project into `folder` (its alembic.ini naming `url`); the table count."""
    (folder / "migrations" / "versions").mkdir(parents=True)
    (folder / "benchapp").mkdir()
    (folder / "benchapp" / "__init__.py").write_text("")
    (folder / "migrations" / "env.py").write_text(ENV)
    set_url(folder, url)
    tables = 0
    down: str | None = None
    for n in range(1, revisions + 1):
        rev = f"r{n:03d}"
        if n == 1:
            body = (
                'op.create_table("account", sa.Column("id", sa.Integer, primary_key=True),\n'
                '        sa.Column("email", sa.Text, nullable=False))\n'
                '    op.execute("INSERT INTO account (email) '
                "SELECT 'a' || g || '@example.com' FROM generate_series(1, 2000) g\")"
            )
            kind = "account"
        else:
            kind = "table" if tables == 0 else KINDS[(n - 2) % len(KINDS)]
            body = _upgrade(n, kind, tables)
        if kind == "table":
            tables += 1
        (folder / "migrations" / "versions" / f"{rev}_{kind}.py").write_text(
            f'"""{kind} ({n})"""\n\nimport sqlalchemy as sa\nfrom alembic import op\n\n'
            f"revision = {rev!r}\ndown_revision = {down!r}\nbranch_labels = None\n"
            f"depends_on = None\n\n\ndef upgrade() -> None:\n    {body}\n"
        )
        down = rev
    (folder / "benchapp" / "models.py").write_text(_models(tables))
    return tables


def set_url(folder: Path, url: str) -> None:
    """Point the project's alembic.ini at `url` (what `alembic upgrade` connects to)."""
    (folder / "alembic.ini").write_text(INI.format(url=url.replace("%", "%%")))
