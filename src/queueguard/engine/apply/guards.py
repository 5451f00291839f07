"""The guards a set's owner hands the runner: what it refuses and adds around the engine's
work. The engine calls them and imports nothing of the owner (the dependency points from
the owner to the engine); queueguard's own set gives its own (`queue_schema/guards.py`:
older hosts, a rollout in progress, an unknown schema, the manifest, the fence, a pooler).

Each read gets a DB-API cursor in a transaction of its own that the runner ends after it:
a guard writes nothing and ends no transaction."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from queueguard.engine.apply.report import UpgradeReport


class Guards(Protocol):
    #: handed to each revision beside the runner's limits (an Alembic revision reads them
    #: from its config's attributes)
    attributes: Mapping[str, object]

    def check_files(self) -> None:
        """Before connecting: refuse a set whose files are not as released."""

    def start(self, cursor: Any) -> str | None:
        """Where the database is, refusing one the runner must not upgrade at all."""

    def before(
        self, connection: Any, cursor: Any, pending: Sequence[str], report: UpgradeReport
    ) -> None:
        """Before the first of `pending`: refuse what must not run now, warn in `report`."""

    def after(self, cursor: Any, report: UpgradeReport) -> None:
        """After the last revision: what the report adds."""
