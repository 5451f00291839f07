"""003 — v0.3: queue ownership (task_queues, runtime_protocol, tasks rebuilt).

Thin revision: the SQL lives in migrations/sql/003/ (see queueguard.upgrade.steps).
"""

from queueguard.upgrade import steps

revision = "003"
down_revision = "002"
branch_labels = None
depends_on = None

# queueguard's facts about this revision (read by queueguard.revisions, never imported there)
predates_lint = True  # released before `queueguard lint` existed: hash-checked, not style-checked
protocol = 3  # creates runtime_protocol with the window [3, 3]
# the lock budget: the exact lock taken on each table that existed before (enforced)
locks = {"tasks": "ACCESS EXCLUSIVE"}


def upgrade() -> None:
    steps.apply(revision)


def downgrade() -> None:
    steps.refuse_downgrade(revision)
