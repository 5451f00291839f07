"""Compatibility alias: `queueguard.upgrade.alembic_config` is
`queueguard.queue_schema.alembic_config`."""

import runpy
import sys

from queueguard.queue_schema import alembic_config

if __name__ == "__main__":  # python -m queueguard.upgrade.alembic_config
    runpy.run_module(alembic_config.__name__, run_name="__main__", alter_sys=True)
else:
    sys.modules[__name__] = alembic_config
