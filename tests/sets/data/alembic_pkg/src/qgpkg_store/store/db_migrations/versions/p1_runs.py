"""runs

Revision ID: p1
Revises:
Create Date: 2024-03-01 10:00:00

"""

import sqlalchemy as sa
from alembic import op

revision = "p1"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "runs",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("name", sa.Text, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("runs")
