"""002 — v0.2: per-family user data.

Thin revision: the SQL lives in migrations/sql/002/ (see queueguard.upgrade.steps).
"""

from queueguard.upgrade import steps

revision = "002"
down_revision = "001"
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
