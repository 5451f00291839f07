"""Tests of queueguard.upgrade: compatibility, preflight; migrations/ holds the migration set."""
