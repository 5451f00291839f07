"""Fingerprints of a database: compared before and after, they tell whether it changed."""

from __future__ import annotations

from typing import Any

from bench.common.databases import query

#: Every table the upgrade may touch; the migration ledger without its applied_at.
TABLES = (
    "executions",
    "scheduled_tasks",
    "tasks",
    "task_queues",
    "task_queue_user_data",
    "runtime_protocol",
    "queueguard_version",
)


def upgrade_state(dsn: str) -> dict[str, Any]:
    """What an upgrade may change: every row of every table it touches (md5), the migration
    ledger without timestamps, and the catalog (tables, constraints, indexes)."""
    present = {
        r[0] for r in query(dsn, "SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
    }
    out: dict[str, Any] = {"tables": sorted(present)}
    for table in TABLES:
        if table in present:
            out[table] = query(
                dsn,
                f"SELECT count(*), md5(string_agg(t::text, '|' ORDER BY t::text)) FROM {table} t",
            )[0]
    if "queueguard_migrations" in present:
        out["ledger"] = query(dsn, "SELECT revision, sha256 FROM queueguard_migrations ORDER BY 1")
    out["constraints"] = query(
        dsn,
        "SELECT conrelid::regclass::text, pg_get_constraintdef(oid) FROM pg_constraint "
        "WHERE connamespace = 'public'::regnamespace ORDER BY 1, 2",
    )
    out["indexes"] = query(
        dsn, "SELECT indexdef FROM pg_indexes WHERE schemaname = 'public' ORDER BY 1"
    )
    return out


def revision(dsn: str) -> str | None:
    """The schema revision the database is stamped at (None: not a queueguard database)."""
    rows = query(dsn, "SELECT version_num FROM queueguard_version")
    return rows[0][0] if rows else None


def written_state(dsn: str) -> list[tuple[Any, ...]]:
    """Relations, and a digest of the rows of queueguard's tables: enough to see any write a
    command made (a cheaper check than `upgrade_state`)."""
    rows = query(
        dsn,
        "SELECT c.relname, c.relkind FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname NOT IN ('pg_catalog', 'information_schema', 'pg_toast') ORDER BY 1",
    )
    for table in ("queueguard_version", "task_queues", "tasks", "executions", "runtime_protocol"):
        if any(r[0] == table for r in rows):
            rows += query(
                dsn,
                f"SELECT '{table}', md5(string_agg(t::text, ',' ORDER BY t::text)) FROM {table} t",
            )
    return rows
