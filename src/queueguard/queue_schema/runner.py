"""`queueguard upgrade` of the own set: the engine's runner, the one every set goes through
(`engine.apply.runner.upgrade`, here its `formats/alembic/per_revision`: one revision per
transaction, each taking the runner lock, on the ladder), with the own set's guards
(`guards.OwnSetGuards`: older hosts, a rollout in progress, an unknown schema, the fence)."""

from __future__ import annotations

import io

from alembic import command

from queueguard import revisions
from queueguard.engine.apply import runner
from queueguard.engine.apply.ladder import RUNNER_WAIT_S
from queueguard.engine.apply.report import UpgradeReport
from queueguard.engine.apply.session import Limits
from queueguard.engine.formats.alembic.per_revision import ALEMBIC
from queueguard.queue_schema.alembic_config import config
from queueguard.queue_schema.guards import OwnSetGuards
from queueguard.revisions import SetFacts
from queueguard.sets import native


def render_sql(
    to: str = "head", start: str | None = None, migrations: SetFacts | None = None
) -> str:
    """The SQL an upgrade would run, without connecting (for DBA review)."""
    migrations = migrations or revisions.packaged()
    target = migrations.resolve(to)
    cfg = config(migrations, progress=False)
    buffer = io.StringIO()
    cfg.output_buffer = buffer
    spec = f"{start}:{target}" if start else target
    with ALEMBIC:
        command.upgrade(cfg, spec, sql=True)
    return buffer.getvalue()


def upgrade(
    dsn: str,
    *,
    to: str = "head",
    lock_timeout_ms: int = 5000,
    statement_timeout_ms: int = 3_600_000,
    retries: int = 3,
    force: bool = False,
    progress: bool = True,
    runner_wait_s: float = RUNNER_WAIT_S,
    migrations: SetFacts | None = None,
    pooled: bool = False,
) -> UpgradeReport:
    """Upgrade the database at `dsn` to `to`; see the module docstring."""
    migrations = migrations or revisions.packaged()
    target = migrations.resolve(to)  # the own set's wording of an unknown --to
    guards = OwnSetGuards(migrations, force, pooled, {"progress": progress})
    limits = Limits(lock_timeout_ms, statement_timeout_ms, retries, runner_wait_s)
    mset = native.load(migrations.root)
    return runner.upgrade(mset, dsn, to=target, limits=limits, guards=guards)
