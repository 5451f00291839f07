"""Compatibility alias: `queueguard.upgrade.legacy` is `queueguard.queue_schema.legacy`
(`python -m queueguard.upgrade.legacy` runs its `__main__`)."""

import sys

from queueguard.queue_schema import legacy

sys.modules[__name__] = legacy
