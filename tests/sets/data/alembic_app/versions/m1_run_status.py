"""run status (runs itself comes from the application's create_all())

Revision ID: m1
Revises:
Create Date: 2024-04-01 10:00:00

"""

import sqlalchemy as sa
from alembic import op

revision = "m1"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("runs", sa.Column("status", sa.Text))


def downgrade() -> None:
    op.drop_column("runs", "status")
