"""queueguard: a fenced task-queue runtime on PostgreSQL and the framework that upgrades it.

The public API (stable; internal module paths may move):

- the runtime: `Matching`, `PhysicalQueue`, `Execution`, `task_payload`;
- the stores: `PostgresStore`, `MemoryStore`;
- the errors: `QueueguardError` and its subclasses (each carries its CLI exit code).

Layout: the runtime half (`core`, `runtime`, `stores`, `snapshot`) never imports the upgrade
half (`upgrade`, `lint`); this module is where the two meet: it registers the upgrade
framework's installer, so a `PostgresStore` on an empty database creates the head schema.
"""

from queueguard.core.history import task_payload
from queueguard.core.keys import PhysicalQueue
from queueguard.core.protocol import PROTOCOL
from queueguard.core.store import Execution
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
from queueguard.runtime.matching import Matching
from queueguard.stores import schema as _schema
from queueguard.stores.memory import MemoryStore
from queueguard.stores.postgres import PostgresStore
from queueguard.upgrade.install import create_head_schema as _create_head_schema

__version__ = "0.4.0"

_schema.register_installer(_create_head_schema)

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
