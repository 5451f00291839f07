"""an index, a wider amount (a rewrite) and a check: plain DDL, the same offline

Revision ID: a2
Revises: a1
"""

import sqlalchemy as sa
from alembic import op

revision = "a2"
down_revision = "a1"


def upgrade() -> None:
    op.create_index("ix_ticket_title", "ticket", ["title"])
    op.alter_column("ticket", "amount", type_=sa.BigInteger)
    # a % in the text: the driver sees it doubled by SQLAlchemy, the server (and --sql) once
    op.create_check_constraint(
        "ck_ticket_amount", "ticket", "amount > 0 AND title NOT LIKE '%draft%'"
    )
