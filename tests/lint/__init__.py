"""Tests of queueguard.lint and `queueguard lint` (corpus in lint_corpus/)."""
