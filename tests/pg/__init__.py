"""Tests of queueguard.pg: the servers tests and users run against."""
