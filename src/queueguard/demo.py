"""`queueguard demo`: the queue lifecycle walkthrough on both stores.

Wires the runtime's walkthrough to the memory store and to PostgreSQL: a given database, or a
scratch database on the embedded server that is dropped afterwards.
"""

from __future__ import annotations

import uuid

from queueguard.pg import scratch
from queueguard.runtime.walkthrough import Step, walkthrough
from queueguard.stores.memory import MemoryStore
from queueguard.stores.postgres import PostgresStore


def run(dsn: str | None = None) -> dict[str, list[Step]]:
    """{store: steps} for the memory store and PostgreSQL (`dsn`, else a scratch database)."""
    results = {"memory": walkthrough(MemoryStore())}
    if dsn is not None:
        results["postgres"] = _on_postgres(dsn, namespace=f"demo-{uuid.uuid4().hex[:8]}")
        return results
    with scratch.ScratchDatabases(scratch.server_dsn("embedded"), prefix="qg_demo") as dbs:
        results["postgres"] = _on_postgres(dbs.create(), namespace="demo")
    return results


def _on_postgres(dsn: str, namespace: str) -> list[Step]:
    store = PostgresStore(dsn, host_id="demo")
    try:
        return walkthrough(store, namespace=namespace)
    finally:
        store.close()
