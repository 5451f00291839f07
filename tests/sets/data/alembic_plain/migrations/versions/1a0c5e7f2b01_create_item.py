"""create item

Revision ID: 1a0c5e7f2b01
Revises:
Create Date: 2024-01-02 10:00:00

"""

import sqlalchemy as sa
from alembic import op

revision = "1a0c5e7f2b01"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    item = op.create_table(
        "item",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("name", sa.Text, nullable=False),
    )
    op.bulk_insert(item, [{"id": 1, "name": "spanner"}, {"id": 2, "name": "wrench"}])


def downgrade() -> None:
    op.drop_table("item")
