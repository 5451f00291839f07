"""The errors of `queueguard mutate`, in the one hierarchy (`queueguard.errors`)."""

from __future__ import annotations

from queueguard.errors import QueueguardError, UsageError


class EquivalentsError(UsageError):
    """The equivalent-mutants file cannot be read: bad TOML, an entry without a reason, …"""


class BaselineFailed(QueueguardError):
    """A gate fails on the unmutated migration set (or on sqlglot's rendering of it), so the
    gates cannot judge mutants: every mutant would count as killed."""

    exit_code = 2


class MutationRunFailed(QueueguardError):
    """The harness itself failed (a worker died outside a gate); the run has no verdict."""

    exit_code = 2
