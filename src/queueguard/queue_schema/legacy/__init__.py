"""Legacy workers: released v0.2 and v0.3 hosts, replayed from their statement catalogs.

`fixtures/legacy_workers/v0.2.sql` and `v0.3.sql` hold, as named statements, exactly what
those host versions issued. The tiny runner here executes them the way the old host did
(transactions, the v0.3 handshake and its refusal rule, the range-conflict report) through
**pg8000**, a driver independent of the runtime's psycopg, so the fence it proves cannot
depend on our own client code. `driver="psycopg"` runs the same statements through psycopg
(the fence must hold under both drivers).

- v0.3 sets `application_name` to `queueguard/3 host=<id>`; it checks `runtime_protocol`
  at startup and in every load's transaction (exactly one row, 3 within [min, max]), and
  unloads a queue on a range conflict.
- v0.2 sets no `application_name` and has no handshake; its spool is the delivery-id table.

`python -m queueguard.queue_schema.legacy --worker v0.3 --dsn DSN` starts a legacy host the way an
operator would and prints one line: accepted, or the error that stops it.
"""

from queueguard.errors import LegacyStatementFailed
from queueguard.queue_schema.legacy.catalog import (
    WORKERS,
    Statement,
    StatementCatalog,
    all_catalogs,
    load_catalog,
    parse_catalog,
)
from queueguard.queue_schema.legacy.fence import FenceProbe, probe_fence
from queueguard.queue_schema.legacy.sessions import DRIVERS, Driver, default_driver
from queueguard.queue_schema.legacy.workers import (
    LegacyQueue,
    LegacyWorker,
    V02Worker,
    V03Worker,
    worker_class,
)

__all__ = [
    "DRIVERS",
    "WORKERS",
    "Driver",
    "FenceProbe",
    "LegacyQueue",
    "LegacyStatementFailed",
    "LegacyWorker",
    "Statement",
    "StatementCatalog",
    "V02Worker",
    "V03Worker",
    "all_catalogs",
    "default_driver",
    "load_catalog",
    "parse_catalog",
    "probe_fence",
    "worker_class",
]
