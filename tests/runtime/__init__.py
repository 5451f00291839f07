"""Tests of queueguard.runtime: backlog batching, matching, crash recovery."""
