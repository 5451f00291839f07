"""004 — v0.4 (head): version directives, auto-backlog relocation, the fence.

Thin revision: the SQL lives in migrations/sql/004/ (see queueguard.upgrade.steps).
"""

from queueguard.upgrade import steps

revision = "004"
down_revision = "003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    steps.apply(revision)


def downgrade() -> None:
    steps.refuse_downgrade(revision)
