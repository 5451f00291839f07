"""Tests of queueguard.core: queue keys, acks."""
