"""002 — v0.2: per-family user data.

Thin revision: the SQL lives in migrations/sql/002/ (see queueguard.upgrade.steps).
"""

from queueguard.upgrade import steps

revision = "002"
down_revision = "001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    steps.apply(revision)


def downgrade() -> None:
    steps.refuse_downgrade(revision)
