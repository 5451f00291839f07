"""Compatibility alias: `queueguard.upgrade.fixturegen` is `queueguard.queue_schema.fixturegen`."""

import runpy
import sys

from queueguard.queue_schema import fixturegen

if __name__ == "__main__":  # python -m queueguard.upgrade.fixturegen
    runpy.run_module(fixturegen.__name__, run_name="__main__", alter_sys=True)
else:
    sys.modules[__name__] = fixturegen
