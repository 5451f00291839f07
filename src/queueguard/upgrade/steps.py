"""Compatibility alias: `queueguard.upgrade.steps` is `queueguard.queue_schema.steps`."""

import runpy
import sys

from queueguard.queue_schema import steps

if __name__ == "__main__":  # python -m queueguard.upgrade.steps
    runpy.run_module(steps.__name__, run_name="__main__", alter_sys=True)
else:
    sys.modules[__name__] = steps
