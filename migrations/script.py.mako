"""${up_revision} — ${message}.

Thin revision: put the SQL steps in migrations/sql/${up_revision}/ (00_locks.sql first).
"""

from queueguard.upgrade import steps

revision = ${repr(up_revision)}
down_revision = ${repr(down_revision)}
branch_labels = ${repr(branch_labels)}
depends_on = ${repr(depends_on)}


def upgrade() -> None:
    steps.apply(revision)


def downgrade() -> None:
    steps.refuse_downgrade(revision)
