"""index the status

Revision ID: m2
Revises: m1
Create Date: 2024-04-02 10:00:00

"""

from alembic import op

revision = "m2"
down_revision = "m1"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("runs_status", "runs", ["status"])


def downgrade() -> None:
    op.drop_index("runs_status", table_name="runs")
