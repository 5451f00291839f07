"""Tests of queueguard.stores: the store contract on both stores."""
