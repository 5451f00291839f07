"""A chain's catalog against another's: a fresh install's (`against_fresh`, the one comparison
both verify commands make) and, through `Reloaded`, a fixture's."""

from __future__ import annotations

from collections.abc import Callable

from queueguard.engine import catalog
from queueguard.pg import tools
from queueguard.pg.scratch import ScratchDatabases

LABELS = ("upgraded", "fresh")


def against_fresh(
    chain: catalog.Catalog,
    fresh: catalog.Catalog,
    leave_out: Callable[[str], bool] = lambda _table: False,
    reloaded: Reloaded | None = None,
) -> tuple[list[str], list[str]]:
    """The differences from the chain's catalog to a fresh install's (`catalog.differences`,
    labelled `LABELS`) and the notes, the tables `leave_out` names not compared; `reloaded`:
    the chain's schema reloaded, so what differs in printing alone is a note, not a difference."""
    chain, fresh = catalog.without(chain, leave_out), catalog.without(fresh, leave_out)
    notes = catalog.notes(chain, fresh, LABELS)
    if reloaded is None:
        return catalog.differences(chain, fresh, LABELS), notes
    return reloaded.compare(chain, fresh, LABELS, notes), notes


class Reloaded:
    """The chain's catalog once its schema went through `pg_dump --schema-only` and a reload
    into a database of its own, made the first time a comparison finds differences: what
    differs only as PostgreSQL prints it is not a difference (`catalog.printing_only`)."""

    def __init__(
        self, scratch: ScratchDatabases, chain: str, leave_out: Callable[[str], bool]
    ) -> None:
        self.scratch, self.chain, self.leave_out = scratch, chain, leave_out
        self._found: catalog.Catalog | None = None

    def __call__(self) -> catalog.Catalog | None:
        if self._found is None:
            schema_only = ["--schema-only", "--no-owner", "--no-privileges"]
            dumped = tools.run("pg_dump", self.chain, schema_only)
            if dumped.returncode != 0:
                return None
            copy = self.scratch.create()
            loaded = tools.run("psql", copy, ["-v", "ON_ERROR_STOP=1", "-q"], stdin=dumped.stdout)
            if loaded.returncode != 0:
                return None
            self._found = catalog.without(catalog.introspect(copy), self.leave_out)
        return self._found

    def compare(
        self, a: catalog.Catalog, b: catalog.Catalog, labels: tuple[str, str], notes: list[str]
    ) -> list[str]:
        """`catalog.differences(a, b)` without what differs in printing alone (said in
        `notes`)."""
        problems = catalog.differences(a, b, labels)
        again = self() if problems else None
        if again is None:
            return problems
        printed = catalog.printing_only(a, b, again)
        if printed:
            notes.append(
                f"{len(printed)} object(s) differ only as PostgreSQL prints them: the same once "
                f"the {labels[0]} schema goes through pg_dump and a reload ("
                + ", ".join(sorted(key for _, key in printed)[:5])
                + ")"
            )
        return catalog.differences(a, b, labels, ignore=printed)
