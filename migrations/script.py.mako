"""${up_revision} — ${message}.

Thin revision: put the SQL steps in migrations/sql/${up_revision}/ (00_locks.sql first).
"""

from queueguard.queue_schema import steps

revision = ${repr(up_revision)}
down_revision = ${repr(down_revision)}
branch_labels = ${repr(branch_labels)}
depends_on = ${repr(depends_on)}

# queueguard's facts about this revision (read by queueguard.revisions; omit to inherit):
# protocol = N               runtime protocol hosts must speak once applied (default: previous)
# fences_older_hosts = True  it fences older hosts: upgrade refuses while they are connected
# relocation_step = "NN_x"   report per-queue relocation progress after this step

# the lock budget: the exact lock taken on each table that existed before (enforced)
locks = {}


def upgrade() -> None:
    steps.apply(revision)


def downgrade() -> None:
    steps.refuse_downgrade(revision)
