"""One Alembic revision as `alembic upgrade DOWN:REV --sql` renders it: offline, no database,
the project's own env.py in offline mode. The statements come apart into the revision's own
and Alembic's bookkeeping on its version table (the CREATE TABLE and INSERT of a first
revision, the UPDATE of any other); transaction control (`BEGIN;`, `COMMIT;`, the pair an
`autocommit_block()` renders) is left out.

A revision that cannot be rendered offline — a data migration that reads rows, or reflects
the schema, through `op.get_bind()` — is said as such, with env.py's error."""

from __future__ import annotations

import io
from dataclasses import dataclass

from alembic import command

from queueguard.sets.alembic_config import config
from queueguard.sets.alembic_env import _alembic_running
from queueguard.sets.alembic_version_table import DEFAULT_VERSION_TABLE, is_bookkeeping
from queueguard.sets.model import MigrationSet, Revision
from queueguard.sets.split import is_transaction_control, split

#: where a revision run as its rendered SQL keeps Alembic's bookkeeping (`Revision.native`)
BOOKKEEPING = "alembic_bookkeeping"
#: `Revision.native`: its version row is an UPDATE of its one parent's, the one parent it is
#: the only child of (set by `sets.alembic`; absent: a set of one line)
LINEAR = "alembic_linear"


@dataclass(frozen=True)
class Rendered:
    """What `alembic upgrade --sql` renders for one revision."""

    statements: tuple[str, ...]
    bookkeeping: tuple[str, ...]


@dataclass(frozen=True)
class NotRendered:
    """Why a revision has no offline rendering, in one line."""

    reason: str


def rendered(mset: MigrationSet, revision: Revision) -> Rendered | NotRendered:
    """`revision`'s SQL as `alembic upgrade DOWN:REV --sql` renders it."""
    if not revision.native.get(LINEAR, True):
        return NotRendered(
            "a revision at a branch or merge point: `alembic upgrade --sql` renders from one "
            "start, and its version row would not be the one the database's heads need"
        )
    table = mset.version_table or DEFAULT_VERSION_TABLE
    cfg = config(mset.root, None)
    buffer = io.StringIO()
    cfg.output_buffer = buffer
    try:
        with _alembic_running():
            command.upgrade(cfg, f"{revision.down or 'base'}:{revision.id}", sql=True)
        found = [s for s in split(buffer.getvalue()) if not is_transaction_control(s)]
    except Exception as exc:  # env.py and the revision are the project's code: any error
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        return NotRendered(
            f"`alembic upgrade --sql` cannot render it ({type(exc).__name__}: {first[:160]})"
        )
    return Rendered(
        tuple(s for s in found if not is_bookkeeping(s, table)),
        tuple(s for s in found if is_bookkeeping(s, table)),
    )
