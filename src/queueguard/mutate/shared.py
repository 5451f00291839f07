"""What every mutant of one run shares: the revisions before the mutated one are identical
in every mutant, so they are migrated once.

- `template`: a database migrated from empty to the mutated revision's predecessor; a mutant's
  fresh install clones it (CREATE DATABASE … TEMPLATE) and applies only the mutated revision
  and those after it;
- `views`: the schema of every revision before the mutated one, as the compatibility matrix
  sees it (`compat.schema_view`), introspected once.
"""

from __future__ import annotations

from dataclasses import dataclass

from queueguard.pg.scratch import ScratchDatabases, dbname_of
from queueguard.queue_schema.compat import SchemaView, schema_view
from queueguard.queue_schema.runner import upgrade
from queueguard.revisions import SetFacts


@dataclass(frozen=True)
class Shared:
    admin_dsn: str
    #: the mutated revision
    revision: str
    #: name of the template database: a fresh install up to the revision's predecessor
    template: str
    #: schema views of the revisions before the mutated one, in order
    views: tuple[SchemaView, ...]


def prepare(databases: ScratchDatabases, migrations: SetFacts, revision: str) -> Shared:
    """Migrate one database revision by revision up to `revision`'s predecessor, viewing
    each schema on the way; it becomes the template."""
    dsn = databases.create()
    views = []
    for before in migrations.ids[: migrations.ids.index(revision)]:
        upgrade(dsn, to=before, progress=False, migrations=migrations)
        views.append(schema_view(dsn))
    return Shared(databases.admin_dsn, revision, dbname_of(dsn), tuple(views))
