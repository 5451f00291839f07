"""Tests of queueguard.snapshot."""
