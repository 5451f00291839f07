"""Tests of the `queueguard` command line (queueguard.cli)."""
