"""Tests of queueguard.queue_schema: compatibility, preflight; migrations/ holds the migration
set."""
