"""accounts

Revision ID: a1
Revises:
Create Date: 2024-02-01 10:00:00

"""

import sqlalchemy as sa
from alembic import op

revision = "a1"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "account",
        sa.Column("id", sa.BigInteger, primary_key=True),
        sa.Column("email", sa.Text, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("account")
