"""index the label concurrently

Revision ID: 3c2e70914d03
Revises: 2b1d6f803c02
Create Date: 2024-01-04 10:00:00

"""

from alembic import op

revision = "3c2e70914d03"
down_revision = "2b1d6f803c02"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # CREATE INDEX CONCURRENTLY cannot run inside a transaction block.
    with op.get_context().autocommit_block():
        op.create_index("ix_item_label", "item", ["label"], postgresql_concurrently=True)


def downgrade() -> None:
    with op.get_context().autocommit_block():
        op.drop_index("ix_item_label", table_name="item", postgresql_concurrently=True)
