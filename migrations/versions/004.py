"""004 — v0.4 (head): version directives, auto-backlog relocation, the fence.

Thin revision: the SQL lives in migrations/sql/004/ (see queueguard.upgrade.steps).
"""

from queueguard.upgrade import steps

revision = "004"
down_revision = "003"
branch_labels = None
depends_on = None

# queueguard's facts about this revision (read by queueguard.revisions, never imported there)
protocol = 4  # sets runtime_protocol to [4, 4]
fences_older_hosts = True  # bumps every range_id: upgrade refuses while v0.3 hosts connect
relocation_step = "03_relocate"  # per-queue relocation progress is reported after this step
ledger = True  # creates queueguard_migrations and records 001-004 (and each later revision)
# the lock budget: the exact lock taken on each table that existed before (enforced)
locks = {
    "task_queues": "ACCESS EXCLUSIVE",
    "tasks": "ACCESS EXCLUSIVE",
    "runtime_protocol": "ACCESS EXCLUSIVE",
    "executions": "ACCESS SHARE",  # read for the directives; History keeps running
}
# the online path's lock ceiling (`upgrade --online`): no transaction of it holds more, and
# no statement it runs outside a transaction (verify observes those: upgrade.online.watch)
online_locks = {
    "task_queues": "ACCESS EXCLUSIVE",  # expand adds, contract/abort drop the owner column
    "runtime_protocol": "ACCESS EXCLUSIVE",  # the window opens and closes
    # batches move and mark rows (ROW EXCLUSIVE); the marker index is built and dropped
    # CONCURRENTLY (SHARE UPDATE EXCLUSIVE): appends and claims go on throughout
    "tasks": "SHARE UPDATE EXCLUSIVE",
    "executions": "ACCESS SHARE",  # read for the directives; History keeps running
}


def upgrade() -> None:
    steps.apply(revision)


def downgrade() -> None:
    steps.refuse_downgrade(revision)
