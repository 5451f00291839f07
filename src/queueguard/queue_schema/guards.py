"""The own set's guards (`engine.apply.guards.Guards`), which the engine's runner calls around
its revisions: the manifest before connecting; a rollout in progress and an unknown schema
refused before anything; hosts of an older protocol refused before a revision that fences
them (unless forced), with a warning where a pooler hides idle hosts; after a fence, the
queues it bumped. The revisions re-check what matters under their own locks (`steps`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from queueguard import revisions
from queueguard.engine import topology
from queueguard.engine.apply.report import UpgradeReport
from queueguard.errors import OlderHostsConnected, RolloutInProgress, UnknownSchema
from queueguard.pg.sqlfiles import queries
from queueguard.queue_schema import audit, manifest
from queueguard.revisions import VERSION_TABLE, SetFacts
from queueguard.stores import schema

Q = queries("queueguard.queue_schema", "upgrade.sql")


@dataclass
class OwnSetGuards:
    migrations: SetFacts
    force: bool = False  # upgrade with older hosts connected
    pooled: bool = False  # the operator says a pooler is in between
    #: handed to each revision (steps.py): whether it prints its progress to stderr
    attributes: Mapping[str, object] = field(default_factory=lambda: {"progress": True})

    def check_files(self) -> None:
        manifest.require_intact(self.migrations.root)

    def start(self, cursor: Any) -> str | None:
        """The revision (`stores.schema`, the one reader), refusing an online rollout in
        progress (the offline path waits until it is finished or aborted; steps re-check
        under the runner lock), an unversioned database or a revision this set does not
        know."""
        state = schema.read_state(cursor)
        if revisions.ROLLOUT_TABLE in state.tables:
            found = rollout(cursor)
            if found is not None:
                raise RolloutInProgress(found[0], found[1], "upgrade offline")
        known = state.versions is None or state.empty or self.migrations.knows(state.revision)
        if not known:
            found_revision = state.revision or ", ".join(state.versions or ()) or "no row"
            raise UnknownSchema(
                f"{VERSION_TABLE} holds revision {found_revision!r}, which this release does "
                f"not know ({self.migrations.span}): refusing to upgrade (preflight reports "
                "schema.revision_unknown)"
            )
        if state.unversioned:
            tables = ", ".join(sorted(state.tables & revisions.OUR_TABLES))
            raise UnknownSchema(
                f"the database has queueguard tables ({tables}) but no {VERSION_TABLE} "
                "table, so its revision is unknown: refusing to upgrade (restore the "
                "version table or load the database into an empty one)"
            )
        return state.revision

    def before(
        self, connection: Any, cursor: Any, pending: Sequence[str], report: UpgradeReport
    ) -> None:
        """Hosts below the protocol a pending revision fences are refused (preflight's
        runtime.older_hosts) unless forced; through a pooler that check is blind to idle
        hosts: said as a warning."""
        fencing = [self.migrations.get(r) for r in pending if self._fences(r)]
        if not fencing:
            return
        if not self.force:
            protocol = max(r.protocol or 0 for r in fencing)
            hosts = audit.older_hosts(cursor, target=pending[-1], protocol=protocol)
            if hosts:
                raise OlderHostsConnected(hosts)
        why = topology.pooler(connection, cursor, self.pooled)
        if why is not None:
            report.warnings.append(f"through a pooler ({why}): {topology.POOLER_BLIND}")

    def after(self, cursor: Any, report: UpgradeReport) -> None:
        """The queues this runner's fence bumped (their range_id)."""
        if any(self._fences(r) for r in report.applied):
            cursor.execute(Q["queue_count"])
            report.queues_fenced = int(cursor.fetchone()[0] or 0)

    def _fences(self, revision: str) -> bool:
        return bool(self.migrations.get(revision).fences_older_hosts)


def rollout(cursor: Any) -> tuple[str, str] | None:
    """(target, phase) of the online rollout in progress, or None (no writes)."""
    cursor.execute(Q["rollout_exists"])
    if not cursor.fetchone()[0]:
        return None
    cursor.execute(Q["rollout"])
    row = cursor.fetchone()
    return (str(row[0]), str(row[1])) if row else None
