"""item label, filled from the name

Revision ID: 2b1d6f803c02
Revises: 1a0c5e7f2b01
Create Date: 2024-01-03 10:00:00

"""

import sqlalchemy as sa
from alembic import op

revision = "2b1d6f803c02"
down_revision = "1a0c5e7f2b01"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("item", sa.Column("label", sa.Text))
    # A data migration in Python: read the rows, compute each label, write it back.
    bind = op.get_bind()
    rows = bind.execute(sa.text("SELECT id, name FROM item ORDER BY id")).all()
    for id_, name in rows:
        bind.execute(
            sa.text("UPDATE item SET label = :label WHERE id = :id"),
            {"label": name.title(), "id": id_},
        )


def downgrade() -> None:
    op.drop_column("item", "label")
