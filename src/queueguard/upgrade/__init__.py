"""Compatibility aliases for the import paths of earlier releases.

queueguard's own migration set and its gates now live in `queueguard.queue_schema`, the
engine for any set in `queueguard.engine`. The released revisions (`migrations/versions/
00x.py`) import `queueguard.upgrade.steps`, an Alembic env.py copied from ours imports
`queueguard.upgrade.alembic_config`, and `python -m queueguard.upgrade.legacy` and
`python -m queueguard.upgrade.fixturegen` are documented commands: each is an alias of its
new module (the same module object, so state and classes are shared).
"""
