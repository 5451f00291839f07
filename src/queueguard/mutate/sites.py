"""A revision's statements as mutation sites.

Each step file is split by `queueguard.lint.model.SqlFile` (sqlglot's tokenizer, offsets
kept). A statement sqlglot parses into a typed tree is mutable on that tree, and a mutant
writes it back as sqlglot renders it. `CREATE TEMP TABLE … AS <query>`, which sqlglot keeps
as a raw `Command`, is split: the text up to `AS` is kept verbatim and the query is the tree.
Other raw commands (`LOCK TABLE`, `DO`, …) have no tree; the operators that need them read
their text (comments and literals blanked).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from sqlglot import exp

from queueguard.lint.model import DIALECT, SqlFile, Statement, ast_table_name, table_name
from queueguard.lint.model import quiet_sqlglot as _quiet
from queueguard.revisions import SetFacts

_IDENT = r'(?:"(?:[^"]|"")*"|[A-Za-z_][\w$]*)'
_NAME = rf"{_IDENT}(?:\s*\.\s*{_IDENT})*"
#: `CREATE [TEMP] TABLE name [ON COMMIT …] AS` before a query sqlglot can parse on its own.
_CTAS = re.compile(
    rf"\s*CREATE\s+(?:(?:GLOBAL|LOCAL)\s+)?(?:(?:TEMP|TEMPORARY|UNLOGGED)\s+)?TABLE\s+"
    rf"(?:IF\s+NOT\s+EXISTS\s+)?(?P<name>{_NAME})"
    r"(?:\s+ON\s+COMMIT\s+(?:DROP|DELETE\s+ROWS|PRESERVE\s+ROWS))?\s+AS\s+",
    re.IGNORECASE,
)
_LOCK = re.compile(
    r"\s*LOCK\s+(?:TABLE\s+)?(?:ONLY\s+)?(?P<names>.*?)(?:\s+IN\s+(?P<mode>[A-Z ]+?)\s+MODE)?"
    r"(?:\s+NOWAIT)?\s*$",
    re.IGNORECASE | re.DOTALL,
)


def parse_query(sql: str) -> exp.Expr | None:
    """sqlglot's typed tree of one statement, or None (unparseable or a raw Command)."""
    import sqlglot
    from sqlglot.errors import SqlglotError

    with _quiet():
        try:
            tree = sqlglot.parse_one(sql, read=DIALECT)
        except (SqlglotError, RecursionError):
            return None
    if not isinstance(tree, exp.Expr) or isinstance(tree, exp.Command):
        return None
    return tree


def render(tree: exp.Expr) -> str:
    return tree.sql(dialect=DIALECT, pretty=True)


def one_line(tree: exp.Expr, limit: int = 72) -> str:
    """A node as one line of SQL, shortened for descriptions."""
    text = " ".join(tree.sql(dialect=DIALECT).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def context(node: exp.Expr) -> str:
    """Where a node sits, for descriptions: `SET ack_level`, `SELECT item 7 (range_id)`, …"""
    child, parent = node, node.parent
    while parent is not None:
        if isinstance(parent, exp.EQ) and isinstance(parent.parent, exp.Update):
            return f"SET {one_line(parent.this)}"
        if isinstance(parent, exp.Select) and child.arg_key == "expressions":
            k = next(i for i, e in enumerate(parent.expressions) if e is child)
            name = child.alias if isinstance(child, exp.Alias) else ""
            insert = parent.parent
            if not name and isinstance(insert, exp.Insert) and isinstance(insert.this, exp.Schema):
                columns = insert.this.expressions
                name = columns[k].name if k < len(columns) else ""
            return f"SELECT item {k + 1}" + (f" ({name})" if name else "")
        if isinstance(parent, exp.Where):
            return "WHERE"
        if isinstance(parent, exp.Join) and child.arg_key == "on":
            return f"JOIN {one_line(parent.this, 30)} ON"
        child, parent = parent, parent.parent
    return "the statement"


@dataclass(frozen=True)
class Lock:
    """A `LOCK TABLE` statement read from its text."""

    tables: tuple[str, ...]
    #: the mode as written, upper case, single-spaced (ACCESS EXCLUSIVE when omitted)
    mode: str
    #: offsets of the mode words in the statement (None when the mode is omitted)
    span: tuple[int, int] | None


def read_lock(statement: Statement) -> Lock | None:
    match = _LOCK.fullmatch(statement.clean)
    if match is None:
        return None
    names = tuple(table_name(n) for n in match.group("names").split(",") if n.strip())
    if match.group("mode") is None:
        return Lock(names, "ACCESS EXCLUSIVE", None)
    mode = " ".join(match.group("mode").upper().split())
    return Lock(names, mode, match.span("mode"))


@dataclass(frozen=True)
class Site:
    """One statement of one step file: where mutants are made."""

    #: the file relative to the migration set root: `sql/004/01_plan.sql`
    path: str
    file: SqlFile
    index: int
    statement: Statement
    #: text kept verbatim before the tree (`CREATE TEMP TABLE x ON COMMIT DROP AS\n`)
    prefix: str = ""
    #: the mutable tree: the statement, or the query after `prefix`; None for raw commands
    body: exp.Expr | None = None
    #: the table a `CREATE TABLE … AS` prefix creates
    creates: str | None = None

    @property
    def text(self) -> str:
        return self.statement.text

    @property
    def line(self) -> int:
        return self.statement.position()[0]

    def render(self, tree: exp.Expr) -> str:
        """The statement with `tree` as its body, as a mutant writes it."""
        return self.prefix + render(tree)

    @cached_property
    def rendered(self) -> str | None:
        """The unchanged statement as mutants of its tree write it (None without a tree)."""
        return None if self.body is None else self.render(self.body)

    @cached_property
    def lock(self) -> Lock | None:
        return read_lock(self.statement) if self.body is None else None


def in_exists_list(node: exp.Expr) -> bool:
    """Whether `node` lies in the select list of an EXISTS subquery (which is never read)."""
    child, parent = node, node.parent
    while parent is not None:
        if isinstance(parent, exp.Select) and isinstance(parent.parent, exp.Exists):
            return child.arg_key == "expressions"
        child, parent = parent, parent.parent
    return False


def site(path: str, file: SqlFile, index: int, statement: Statement) -> Site:
    tree = statement.ast
    if tree is not None:
        return Site(path, file, index, statement, body=tree)
    match = _CTAS.match(statement.clean)
    if match is not None:
        query = parse_query(statement.text[match.end() :])
        if isinstance(query, exp.Query):
            prefix = statement.text[: match.end()]
            return Site(path, file, index, statement, prefix, query, table_name(match["name"]))
    return Site(path, file, index, statement)


@dataclass(frozen=True)
class RevisionSites:
    """Every statement of one revision, in execution order."""

    revision: str
    root: Path
    files: tuple[tuple[str, SqlFile], ...]

    @cached_property
    def sites(self) -> tuple[Site, ...]:
        return tuple(
            site(path, file, i, statement)
            for path, file in self.files
            for i, statement in enumerate(file.statements)
        )

    def of(self, path: str) -> Iterator[Site]:
        return (s for s in self.sites if s.path == path)

    @cached_property
    def written(self) -> frozenset[str]:
        """Tables the revision creates, alters, writes or locks."""
        found: set[str] = set()
        for s in self.sites:
            if s.creates:
                found.add(s.creates)
            if s.lock is not None:
                found.update(s.lock.tables)
            if s.body is None:
                continue
            for node in s.body.walk():
                if isinstance(node, exp.Insert | exp.Update | exp.Delete | exp.Alter):
                    target = node.this
                    if isinstance(target, exp.Schema):
                        target = target.this
                    if isinstance(target, exp.Table):
                        found.add(ast_table_name(target))
                elif isinstance(node, exp.Create) and isinstance(node.this, exp.Schema | exp.Table):
                    target = node.this.this if isinstance(node.this, exp.Schema) else node.this
                    found.add(ast_table_name(target))
        return frozenset(found)

    def part(self, online: bool) -> RevisionSites:
        """The step files, or the online path: each runs, and is judged, on its own."""
        files = tuple((path, file) for path, file in self.files if is_online(path) == online)
        return RevisionSites(self.revision, self.root, files)

    @cached_property
    def read_only(self) -> tuple[str, ...]:
        """Tables the revision reads and never writes (sorted; PostgreSQL's catalogs aside)."""
        read: set[str] = set()
        for s in self.sites:
            if s.body is None:
                continue
            ctes = {c.alias_or_name for c in s.body.find_all(exp.CTE)}
            read.update(
                ast_table_name(t)
                for t in s.body.find_all(exp.Table)
                # read = named in a FROM or JOIN (not FOR UPDATE OF, a constraint, an index)
                if t.name and t.name not in ctes and t.find_ancestor(exp.From, exp.Join)
            )
        return tuple(sorted(t for t in read - self.written if not t.startswith("pg_")))

    @cached_property
    def locks(self) -> tuple[Site, ...]:
        return tuple(s for s in self.sites if s.lock is not None)


def is_online(path: str) -> bool:
    """A file of the revision's online path (`sql/<rev>/online/`), not one of its steps."""
    return "/online/" in path


def revision_sites(migrations: SetFacts, revision: str) -> RevisionSites:
    from queueguard.queue_schema.manifest import online_files, step_files

    migrations.get(revision)  # UsageError for an unknown revision
    paths = [*step_files(revision, migrations.root), *online_files(revision, migrations.root)]
    files = tuple(
        (p.relative_to(migrations.root).as_posix(), SqlFile.read(p, "migration", revision))
        for p in paths
    )
    return RevisionSites(revision, migrations.root, files)


def from_texts(
    revision: str, files: Mapping[str, str], root: Path = Path("/migrations")
) -> RevisionSites:
    """Sites of step files given as text (`{"sql/009/01_x.sql": "…"}`), in name order."""
    return RevisionSites(
        revision,
        root,
        tuple(
            (path, SqlFile(root / path, "migration", files[path], revision))
            for path in sorted(files)
        ),
    )
