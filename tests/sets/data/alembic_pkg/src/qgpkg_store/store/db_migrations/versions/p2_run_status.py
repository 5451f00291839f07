"""run status

Revision ID: p2
Revises: p1
Create Date: 2024-03-02 10:00:00

"""

import sqlalchemy as sa
from alembic import op

revision = "p2"
down_revision = "p1"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("runs", sa.Column("status", sa.Text))


def downgrade() -> None:
    op.drop_column("runs", "status")
