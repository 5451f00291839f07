"""audit.not_read_only: every audit query is provably read-only.

An audit file is exactly one query (preflight sends it with the extended protocol) that sqlglot
parses fully with the PostgreSQL dialect, and whose tree holds only reads: no DML (also not in a
CTE), no DDL, no `SELECT … INTO`, no `FOR UPDATE/SHARE`, no COPY, CALL, DO, SET or transaction
control, and only function calls that are known read-only built-ins. The function check is an
allowlist, not a denylist: a user-defined or schema-qualified function can write, so only the
names below (and sqlglot's typed built-ins) pass; the denylist exists to explain the usual
offenders (`set_config`, `nextval`, advisory locks, `dblink`, …).

Not modelled: user-defined operators and casts (they can call functions). The runtime guarantee
stays preflight's `BEGIN READ ONLY`; this rule is the review-time proof. It cannot be silenced.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from sqlglot import exp

from queueguard.lint.model import Corpus, Finding, Rule, SqlFile, Statement

CODE = "audit.not_read_only"


def _classes(*names: str) -> tuple[type[exp.Expression], ...]:
    """sqlglot classes by name, skipping any this sqlglot version does not have."""
    found = (getattr(exp, n, None) for n in names)
    return tuple(c for c in found if isinstance(c, type) and issubclass(c, exp.Expression))


#: Nodes that write, lock, change settings or escape the parser, with what to say about them.
_FORBIDDEN: tuple[tuple[tuple[type[exp.Expression], ...], str, tuple[str, ...]], ...] = (
    (_classes("Insert", "Update", "Delete", "Merge"), "writes rows", ()),
    (
        _classes(
            "Create",
            "Drop",
            "Alter",
            "AlterTable",
            "TruncateTable",
            "Comment",
            "Grant",
            "Revoke",
            "Analyze",
            "Refresh",
            "LoadData",
            "Cache",
            "Uncache",
        ),
        "changes the catalog (DDL)",
        (),
    ),
    (_classes("Into"), "creates a table", ("INTO",)),
    (_classes("Lock"), "locks rows (ROW SHARE on the table)", ("FOR",)),
    (_classes("Copy"), "moves data in or out of the server", ("COPY",)),
    (
        _classes("Set", "Transaction", "Commit", "Rollback", "Use", "Pragma", "Execute", "Kill"),
        "changes the transaction or a setting",
        (),
    ),
    (_classes("Command"), "is syntax sqlglot cannot parse into a tree: not provably read-only", ()),
)

#: PostgreSQL built-ins known to be read-only that sqlglot parses as anonymous functions.
#: Add a name only after checking it cannot write, lock or run SQL text.
ALLOWED_FUNCTIONS = frozenset(
    (
        "age",
        "array_agg",
        "array_length",
        "array_position",
        "array_to_string",
        "cardinality",
        "char_length",
        "clock_timestamp",
        "col_description",
        "convert_from",
        "convert_to",
        "current_setting",
        "format_type",
        "has_table_privilege",
        "json_agg",
        "json_build_array",
        "json_build_object",
        "jsonb_agg",
        "jsonb_array_elements",
        "jsonb_array_length",
        "jsonb_build_array",
        "jsonb_build_object",
        "jsonb_each",
        "jsonb_each_text",
        "jsonb_object_agg",
        "jsonb_object_keys",
        "jsonb_typeof",
        "make_interval",
        "obj_description",
        "octet_length",
        "pg_backend_pid",
        "pg_get_constraintdef",
        "pg_get_expr",
        "pg_get_indexdef",
        "pg_has_role",
        "pg_indexes_size",
        "pg_relation_size",
        "pg_size_pretty",
        "pg_table_size",
        "pg_total_relation_size",
        "pg_typeof",
        "quote_ident",
        "quote_literal",
        "regexp_matches",
        "regexp_split_to_array",
        "regexp_split_to_table",
        "split_part",
        "statement_timestamp",
        "to_json",
        "to_jsonb",
        "to_regclass",
        "to_regtype",
        "transaction_timestamp",
    )
)

#: Well-known offenders, with the reason (a name matching no entry and not allowed is
#: reported as "not on the read-only allowlist").
DENIED_FUNCTIONS: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern), reason)
    for pattern, reason in (
        (r"set_config$", "changes a setting"),
        (r"(nextval|setval)$", "advances or sets a sequence (a write no rollback undoes)"),
        (r"pg_(try_)?advisory_", "takes an advisory lock"),
        (r"dblink", "runs SQL over another connection, outside this read-only transaction"),
        (r"(txid_current|pg_current_xact_id)$", "assigns a transaction id (a write)"),
        (r"(query|cursor)_to_xml", "executes SQL text"),
        (r"pg_notify$", "sends a notification"),
        (r"lo_", "reads or writes large objects"),
        (r"pg_(terminate|cancel)_backend$", "signals another session"),
        (r"pg_sleep", "holds the snapshot and locks for a chosen time"),
        (r"pg_(read|read_binary|ls)_(file|dir)", "reads server files"),
        (
            r"pg_(reload_conf|rotate_logfile|switch_wal|create_restore_point|stat_reset)",
            "changes server state",
        ),
        (r"pg_logical_emit_message$", "writes WAL"),
    )
)

#: Typed sqlglot functions that are not read-only.
_FORBIDDEN_FUNCS = _classes("NextValueFor", "Seq1", "Seq2", "Seq4", "Seq8", "ToFile")


def check(corpus: Corpus) -> Iterator[Finding]:
    for file in corpus.audit_files:
        yield from _check_file(file)


def _check_file(file: SqlFile) -> Iterator[Finding]:
    if file.syntax_error:
        yield _finding(file, 0, f"cannot be tokenized ({file.syntax_error})", _HINT_PARSE)
        return
    if not file.statements:
        yield _finding(file, 0, "holds no query", "an audit file is exactly one SELECT")
    for i, statement in enumerate(file.statements):
        if i:
            yield _finding(
                file,
                statement.start,
                "a second statement (preflight sends each audit file as one statement)",
                "move it into its own audit file",
            )
        yield from _check_statement(statement)


def _check_statement(stmt: Statement) -> Iterator[Finding]:
    ast, error, warnings = stmt.parsed
    file = stmt.file
    if ast is None:
        yield _finding(file, stmt.start, f"sqlglot cannot parse it ({error})", _HINT_PARSE)
        return
    if warnings and not isinstance(ast, exp.Command):
        yield _finding(
            file, stmt.start, f"sqlglot parses it only partially ({warnings[0]})", _HINT_PARSE
        )
    flagged = any(classes and isinstance(ast, classes) for classes, _, _ in _FORBIDDEN)
    if not isinstance(ast, exp.Query | exp.Values) and not flagged:
        kind = type(ast).__name__.upper()
        yield _finding(file, stmt.start, f"is not a query (sqlglot reads {kind})", _HINT_QUERY)
    seen: set[tuple[int, str]] = set()
    for node in ast.walk():
        if not isinstance(node, exp.Expression):  # every concrete sqlglot node is one
            continue
        for offset, message, hint in _problems(stmt, node):
            if (offset, message) not in seen:
                seen.add((offset, message))
                yield _finding(file, offset, message, hint)


def _problems(stmt: Statement, node: exp.Expression) -> Iterator[tuple[int, str, str]]:
    for classes, why, keywords in _FORBIDDEN:
        if classes and isinstance(node, classes):
            what = _first_word(stmt) if isinstance(node, exp.Command) else _node_name(node)
            yield _offset(stmt, node, keywords), f"{what} {why}", _HINT_QUERY
    if isinstance(node, exp.Func):
        yield from _function_problems(stmt, node)


def _function_problems(stmt: Statement, node: exp.Expression) -> Iterator[tuple[int, str, str]]:
    offset = _offset(stmt, node, ())
    parent = node.parent
    qualifier = (
        parent.this.name.lower()
        if isinstance(parent, exp.Dot) and parent.expression is node
        else None
    )
    anonymous = isinstance(node, exp.Anonymous | exp.AnonymousAggFunc)
    name = node.name.lower() if anonymous else type(node).__name__
    if qualifier not in (None, "pg_catalog"):
        yield offset, f"calls {qualifier}.{name}(), not a built-in: it may write", _HINT_FUNC
    elif anonymous and name not in ALLOWED_FUNCTIONS:
        reason = next((r for p, r in DENIED_FUNCTIONS if p.match(name)), None)
        if reason:
            yield offset, f"calls {name}(), which {reason}", _HINT_QUERY
        else:
            yield offset, f"calls {name}(), which is not on the read-only allowlist", _HINT_FUNC
    elif isinstance(node, _FORBIDDEN_FUNCS):
        yield offset, f"calls {name}, which writes", _HINT_QUERY


def _offset(stmt: Statement, node: exp.Expression, keywords: tuple[str, ...]) -> int:
    """Where in the file the node is: its own position, a keyword token, else the statement."""
    meta = node.meta if node._meta else {}
    if "start" in meta:
        return stmt.start + int(meta["start"])
    if isinstance(node, exp.Lock):
        texts = [t.text.upper() for t in stmt.tokens]
        for i, token in enumerate(stmt.tokens[:-1]):
            if texts[i] == "FOR" and texts[i + 1] in ("UPDATE", "SHARE", "NO", "KEY"):
                return token.start
    wanted = keywords or (type(node).__name__.upper(),)
    for token in stmt.tokens:
        if token.text.upper() in wanted:
            return token.start
    return stmt.start


def _node_name(node: exp.Expression) -> str:
    names = {"Into": "SELECT … INTO", "Lock": "FOR UPDATE/SHARE", "TruncateTable": "TRUNCATE"}
    name = type(node).__name__
    return names.get(name, name.upper())


def _first_word(stmt: Statement) -> str:
    match = re.match(r"\s*(\w+)", stmt.clean)
    return match.group(1).upper() if match else "it"


def _finding(file: SqlFile, offset: int, message: str, hint: str) -> Finding:
    return file.finding(CODE, offset, f"audit query {message}", hint)


_HINT_QUERY = "an audit query is one plain SELECT that only reads; remove the write or lock"
_HINT_PARSE = (
    "rewrite it in syntax sqlglot's postgres dialect parses: what cannot be parsed cannot be "
    "proven read-only"
)
_HINT_FUNC = (
    "use a built-in on the allowlist, or add this one to ALLOWED_FUNCTIONS in "
    "queueguard/lint/rules/audit_read_only.py after checking that it cannot write"
)

RULE = Rule(CODE, "audit queries are provably read-only", check, False)
