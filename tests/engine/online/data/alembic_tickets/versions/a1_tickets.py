"""tickets, filled

Revision ID: a1
Revises:
"""

import sqlalchemy as sa
from alembic import op

revision = "a1"
down_revision = None


def upgrade() -> None:
    op.create_table(
        "ticket",
        sa.Column("id", sa.BigInteger, primary_key=True),
        sa.Column("title", sa.Text, nullable=False),
        sa.Column("amount", sa.Integer),
    )
    op.execute(
        "INSERT INTO ticket (id, title, amount) "
        "SELECT g, 't' || g, g FROM generate_series(1, 3000) g"
    )
