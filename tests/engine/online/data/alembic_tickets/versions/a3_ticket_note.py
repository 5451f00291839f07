"""a note whose default depends on the rows: the revision reads them first

Revision ID: a3
Revises: a2
"""

import sqlalchemy as sa
from alembic import op

revision = "a3"
down_revision = "a2"


def upgrade() -> None:
    count = op.get_bind().execute(sa.text("SELECT count(*) FROM ticket")).scalar()
    op.add_column("ticket", sa.Column("note", sa.Text, server_default=f"one of {count}"))
