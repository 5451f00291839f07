"""Migration sets in any format: queueguard's own, Temporal's versioned schema directories,
Alembic projects and plain SQL directories (`model` is what the rest of queueguard sees)."""
