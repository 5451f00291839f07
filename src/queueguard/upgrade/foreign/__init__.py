"""Applying migration sets of other formats (Temporal's schema, plain SQL directories,
Alembic projects) with the runner's guarantees: `runner` applies, `half_applied` refuses a
version another tool stopped in the middle of."""
