"""Tests of queueguard.testing, the pytest plugin."""
