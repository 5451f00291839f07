"""001 — v0.1: History's tables and the delivery-id spool.

Thin revision: the SQL lives in migrations/sql/001/ (see queueguard.upgrade.steps).
"""

from queueguard.upgrade import steps

revision = "001"
down_revision = None
branch_labels = None
depends_on = None

# queueguard's facts about this revision (read by queueguard.revisions, never imported there)
predates_lint = True  # released before `queueguard lint` existed: hash-checked, not style-checked
# the lock budget: the exact lock taken on each table that existed before (enforced)
locks = {}


def upgrade() -> None:
    steps.apply(revision)


def downgrade() -> None:
    steps.refuse_downgrade(revision)
