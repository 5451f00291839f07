"""A two-base Alembic project written for these tests, laid out as Galaxy's model migrations
are: the ini beside a script directory `alembic/` with two version folders (one per
labelled base) joined by the ini's `path_separator`, `prepend_sys_path = .` (env.py imports
a module of the project's folder), forks merged again, and one fork re-merged after it was
merged once. `main` is the long line, `aux` a base of its own (two heads by design)."""

from __future__ import annotations

from pathlib import Path

#: revision: (down revision(s), branch label, statement)
MAIN: dict[str, tuple[str | tuple[str, ...] | None, str | None, str]] = {
    "m01": (None, "main", "CREATE TABLE item (id int PRIMARY KEY)"),
    "m02": ("m01", None, "ALTER TABLE item ADD COLUMN c02 int"),
    "m03a": ("m02", None, "ALTER TABLE item ADD COLUMN c03a int"),
    "m03b": ("m02", None, "ALTER TABLE item ADD COLUMN c03b int"),
    "m04": (("m03a", "m03b"), None, "ALTER TABLE item ADD COLUMN c04 int"),
    "m05": ("m04", None, "UPDATE item SET c04 = 1"),
    "m06a": ("m05", None, "ALTER TABLE item ADD COLUMN c06a int"),
    "m06b": ("m05", None, "ALTER TABLE item ADD COLUMN c06b int"),
    "m07": (("m06a", "m06b"), None, "ALTER TABLE item ADD COLUMN c07 int"),
    "m06c": ("m06b", None, "ALTER TABLE item ADD COLUMN c06c int"),  # a fork merged once
    "m08": ("m07", None, "ALTER TABLE item ADD COLUMN c08 int"),
    "m09": (("m08", "m06c"), None, "ALTER TABLE item ADD COLUMN c09 int"),  # merged again
    "m10": ("m09", None, "CREATE INDEX item_c09 ON item (c09)"),
}
AUX: dict[str, tuple[str | tuple[str, ...] | None, str | None, str]] = {
    "a01": (None, "aux", "CREATE TABLE aux_thing (id int PRIMARY KEY)"),
    "a02": ("a01", None, "ALTER TABLE aux_thing ADD COLUMN name text"),
}

ENV = '''"""env.py of the two-base project: its table name comes from a module of the project's
folder, found through prepend_sys_path = ."""

from alembic import context
from sqlalchemy import engine_from_config, pool

import two_bases_model

config = context.config


def run_migrations_offline() -> None:
    context.configure(url=config.get_main_option("sqlalchemy.url"), literal_binds=True,
                      version_table=two_bases_model.VERSION_TABLE)
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connectable = engine_from_config(
        config.get_section(config.config_ini_section, {}), prefix="sqlalchemy.",
        poolclass=pool.NullPool,
    )
    with connectable.connect() as connection:
        context.configure(connection=connection, version_table=two_bases_model.VERSION_TABLE)
        with context.begin_transaction():
            context.run_migrations()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
'''

SEPARATORS = {"space": " ", "newline": "\n    ", "os": ":", ":": ":", ";": ";"}


def revision_file(rev: str, down: object, label: str | None, statement: str) -> str:
    labels = (label,) if label else None
    return (
        f'"""{rev}"""\n\nfrom alembic import op\n\nrevision = {rev!r}\n'
        f"down_revision = {down!r}\nbranch_labels = {labels!r}\ndepends_on = None\n\n\n"
        f"def upgrade() -> None:\n    op.execute({statement!r})\n\n\n"
        "def downgrade() -> None:\n    pass\n"
    )


def ini(separator: str | None, locations: list[str]) -> str:
    """The ini; `separator` None: no path_separator (Alembic's legacy splitting)."""
    joiner = SEPARATORS[separator] if separator is not None else " "
    lines = [
        "[alembic]",
        "script_location = %(here)s/alembic",
        "prepend_sys_path = .",
        f"version_locations = {joiner.join(locations)}",
    ]
    if separator is not None:
        lines.append(f"path_separator = {separator}")
    return "\n".join(lines) + "\nsqlalchemy.url = driver://user:pass@localhost/dbname\n"


def write(
    root: Path,
    separator: str | None = ";",
    main: dict[str, tuple[str | tuple[str, ...] | None, str | None, str]] | None = None,
    locations: list[str] | None = None,
) -> Path:
    """The project at `root`; `locations` as the ini writes them (default: both folders,
    absolute through %(here)s)."""
    script = root / "alembic"
    for folder, revisions in (("versions_main", main or MAIN), ("versions_aux", AUX)):
        (script / folder).mkdir(parents=True)
        for rev, (down, label, statement) in revisions.items():
            (script / folder / f"{rev}_x.py").write_text(revision_file(rev, down, label, statement))
    (script / "env.py").write_text(ENV)
    (script / "script.py.mako").write_text("# a template\n")
    (root / "two_bases_model.py").write_text('VERSION_TABLE = "alembic_version"\n')
    found = locations or ["%(here)s/alembic/versions_main", "%(here)s/alembic/versions_aux"]
    (root / "alembic.ini").write_text(ini(separator, found))
    return root
