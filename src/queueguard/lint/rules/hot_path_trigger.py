"""migration.hot_path_trigger: no trigger (or rewrite rule) on tasks or task_queues.

Every spool, dispatch and checkpoint writes these tables; a trigger there runs in each of
those transactions, takes its own locks and can fail them (a trigger that keeps
a copied column in step turns every write into two). sqlglot models `CREATE TRIGGER`; `CREATE RULE`
(and any trigger syntax sqlglot leaves as an opaque command) is read from the statement text.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from sqlglot import exp

from queueguard.lint.model import Corpus, Finding, Rule, Statement, ast_table_name, table_name

CODE = "migration.hot_path_trigger"
HOT_TABLES = ("tasks", "task_queues")
HINT = (
    "enforce the invariant where the runtime writes the row (one code path, tested on both "
    "stores) or with a constraint; no trigger on tasks or task_queues"
)
_IDENT = r'(?:"(?:[^"]|"")*"|[A-Za-z_][\w$]*)'
_NAME = rf"{_IDENT}(?:\s*\.\s*{_IDENT})*"
_FLAGS = re.IGNORECASE | re.DOTALL
_TRIGGER = re.compile(
    rf"\s*CREATE\s+(?:OR\s+REPLACE\s+)?(?:CONSTRAINT\s+)?TRIGGER\s+(?P<name>{_NAME})\s+"
    rf"(?:BEFORE|AFTER|INSTEAD\s+OF)\b.*?\bON\s+(?:ONLY\s+)?(?P<table>{_NAME})",
    _FLAGS,
)
_RULE = re.compile(
    rf"\s*CREATE\s+(?:OR\s+REPLACE\s+)?RULE\s+(?P<name>{_NAME})\s+AS\s+ON\s+\w+\s+TO\s+"
    rf"(?:ONLY\s+)?(?P<table>{_NAME})",
    _FLAGS,
)


def check(corpus: Corpus) -> Iterator[Finding]:
    for file in corpus.migration_files:
        for stmt in file.statements:
            for kind, name, table, offset in _definitions(stmt):
                if table in HOT_TABLES:
                    yield file.finding(
                        CODE,
                        stmt.start + offset,
                        f"{kind} {name} on {table}: {table} is on the hot path "
                        "(every spool, dispatch and checkpoint writes it)",
                        HINT,
                    )


def _definitions(stmt: Statement) -> list[tuple[str, str, str, int]]:
    """(kind, name, table, offset in the statement) of a trigger or rule the statement makes."""
    ast = stmt.ast
    if isinstance(ast, exp.Create) and str(ast.args.get("kind", "")).upper() == "TRIGGER":
        props = ast.find(exp.TriggerProperties)
        table = props.args.get("table") if props else None
        ident = table.this if isinstance(table, exp.Table) else None
        if isinstance(table, exp.Table) and isinstance(ident, exp.Identifier) and ident._meta:
            start = int(ident.meta.get("start", 0))  # quotes included
            return [("trigger", ast.this.name, ast_table_name(table), start)]
    for kind, pattern in (("trigger", _TRIGGER), ("rule", _RULE)):
        if match := pattern.match(stmt.clean):
            name = table_name(match.group("name"))
            return [(kind, name, table_name(match.group("table")), match.start("table"))]
    return []


RULE = Rule(CODE, "no trigger or rewrite rule on tasks or task_queues", check)
