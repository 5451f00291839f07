"""Memory snapshots: the memory store as one JSON document (format 4; format 3 upgraded by
a pure-Python 004; legacy formats rejected)."""

from queueguard.snapshot.document import (
    BEHAVIORS,
    CURRENT_FORMAT,
    STATUSES,
    export_memory,
    import_memory,
    normalise,
    parse,
    upgrade_document,
)

__all__ = [
    "BEHAVIORS",
    "CURRENT_FORMAT",
    "STATUSES",
    "export_memory",
    "import_memory",
    "normalise",
    "parse",
    "upgrade_document",
]
