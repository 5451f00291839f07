"""Tests of queueguard.sets: migration sets in any format."""
