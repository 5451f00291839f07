"""An Alembic project (and queueguard's own set) in the engine: `runner` (upgrade through its
env.py), `online_sql` (a revision run as its rendered SQL), `trace` (plan's watch of its
Python revisions)."""
