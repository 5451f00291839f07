"""account emails are unique

Revision ID: b2
Revises: a1
Create Date: 2024-02-02 10:00:00

"""

from alembic import op

revision = "b2"
down_revision = "a1"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_unique_constraint("account_email_key", "account", ["email"])


def downgrade() -> None:
    op.drop_constraint("account_email_key", "account")
