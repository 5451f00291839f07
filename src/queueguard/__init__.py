"""queueguard: a fenced task-queue runtime on PostgreSQL and the framework that upgrades it.

The public API (stable; internal module paths may move):

- the runtime: `Matching`, `PhysicalQueue`, `Execution`, `task_payload`;
- the stores: `PostgresStore`, `MemoryStore`;
- the errors: `QueueguardError` and its subclasses (each carries its CLI exit code).

Layout: the runtime half (`core`, `runtime`, `stores`, `snapshot`) never imports the upgrade
half (`upgrade`, `lint`); this module is where the two meet: it registers the upgrade
framework's installer, so a `PostgresStore` on an empty database creates the head schema.

The runtime's names are imported when first used (PEP 562): importing the package, as every
`queueguard` command does first, loads neither the runtime nor the database driver.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from queueguard.core import installer as _installer
from queueguard.errors import (
    ConnectionFailed,
    DataDirVersionMismatch,
    EmbeddedServerError,
    InvalidDsn,
    InvalidQueueKey,
    IrreversibleMigration,
    LegacySnapshotError,
    LockTimeout,
    MigrationError,
    MigrationRefused,
    NotOwner,
    OlderHostsConnected,
    PreflightFailed,
    ProtocolMismatch,
    QueueguardError,
    QueueUnloaded,
    SchemaTooOld,
    SnapshotError,
    StaleRangeError,
    TamperedMigration,
    UnknownSchema,
    UsageError,
    UserDataConflict,
)

__version__ = "0.4.0"

#: each public name imported on first use -> the module it lives in (the errors, cheap, are
#: imported above)
_PUBLIC = {
    "task_payload": "queueguard.core.history",
    "PhysicalQueue": "queueguard.core.keys",
    "PROTOCOL": "queueguard.core.protocol",
    "Execution": "queueguard.core.store",
    "Matching": "queueguard.runtime.matching",
    "MemoryStore": "queueguard.stores.memory",
    "PostgresStore": "queueguard.stores.postgres",
}


def _create_head_schema(dsn: str) -> None:
    from queueguard.queue_schema.install import create_head_schema

    create_head_schema(dsn)


_installer.register(_create_head_schema)


def __getattr__(name: str) -> Any:
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'queueguard' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


if TYPE_CHECKING:
    from queueguard.core.history import task_payload
    from queueguard.core.keys import PhysicalQueue
    from queueguard.core.protocol import PROTOCOL
    from queueguard.core.store import Execution
    from queueguard.runtime.matching import Matching
    from queueguard.stores.memory import MemoryStore
    from queueguard.stores.postgres import PostgresStore

__all__ = [
    "PROTOCOL",
    "ConnectionFailed",
    "DataDirVersionMismatch",
    "EmbeddedServerError",
    "Execution",
    "InvalidDsn",
    "InvalidQueueKey",
    "IrreversibleMigration",
    "LegacySnapshotError",
    "LockTimeout",
    "Matching",
    "MemoryStore",
    "MigrationError",
    "MigrationRefused",
    "NotOwner",
    "OlderHostsConnected",
    "PhysicalQueue",
    "PostgresStore",
    "PreflightFailed",
    "ProtocolMismatch",
    "QueueUnloaded",
    "QueueguardError",
    "SchemaTooOld",
    "SnapshotError",
    "StaleRangeError",
    "TamperedMigration",
    "UnknownSchema",
    "UsageError",
    "UserDataConflict",
    "__version__",
    "task_payload",
]
