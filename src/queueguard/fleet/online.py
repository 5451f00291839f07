"""`fleet upgrade --online`: every statement over the lock budget in an online form,
decided and proven once per group of targets — targets at the same revision with the same
catalog — on a sample of the group's largest target, then applied to each target of the
group as `upgrade --online` applies it to one database.

A target a killed run left with a statement part applied is settled and finished first (as
`upgrade --online` does); if a revision of it is still part applied after that, it is
prepared on its own sample, not the group's. Database targets only: the rebuild's working
schema is one per database."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from queueguard.engine.apply.report import UpgradeReport
from queueguard.engine.apply.session import Limits
from queueguard.engine.online import upgrade as online_upgrade
from queueguard.engine.online.upgrade import Prepared
from queueguard.fleet.targets import Target
from queueguard.sets import MigrationSet


@dataclass
class Online:
    mset: MigrationSet
    to: str | None
    budget_ms: float
    force: bool = False
    options: Mapping[str, Any] = field(default_factory=dict)
    scratch_admin: str | None = None
    tell: Callable[[str], None] = lambda _: None
    #: a target's group (revision, catalog fingerprint), and each group's largest target
    group_of: dict[str, tuple[str | None, str]] = field(default_factory=dict)
    largest: dict[tuple[str | None, str], Target] = field(default_factory=dict)
    _prepared: dict[tuple[str | None, str], Prepared] = field(default_factory=dict)
    _locks: dict[tuple[str | None, str], threading.Lock] = field(default_factory=dict)
    _guard: threading.Lock = field(default_factory=threading.Lock)

    def group(self, targets: Sequence[Target]) -> None:
        """Each target's group, read on it (its revision, catalog and size; read only); a
        target that cannot be read is left out (its claim meets the same error)."""
        from queueguard.fleet.plan import read, size_of

        sizes: dict[tuple[str | None, str], int] = {}
        with ThreadPoolExecutor(8) as pool:
            for found in pool.map(lambda t: read(self.mset, t), targets):
                if found.error is not None:
                    continue
                key, size = (found.revision, found.fingerprint), size_of(found.sizes)
                self.group_of[found.target.name] = key
                if size >= sizes.get(key, -1):
                    sizes[key], self.largest[key] = size, found.target

    def prepared(self, target: Target) -> Prepared | None:
        """The group's forms, prepared on its largest target the first time one of its
        targets asks (the others wait for it); None: the target is in no known group."""
        key = self.group_of.get(target.name)
        if key is None:
            return None
        with self._guard:
            lock = self._locks.setdefault(key, threading.Lock())
        with lock:
            if key not in self._prepared:
                largest = self.largest[key]
                self.tell(f"online: preparing the forms of {largest.name}'s group on its sample")
                self._prepared[key] = online_upgrade.prepare(
                    self.mset, largest.dsn, to=self.to, budget_ms=self.budget_ms,
                    force=self.force, options=self.options, scratch_admin=self.scratch_admin,
                    tell=self.tell,
                )  # fmt: skip
            return self._prepared[key]

    def upgrade(
        self, target: Target, dsn: str, limits: Limits, stop: Callable[[], bool]
    ) -> UpgradeReport:
        """The target brought to `to` with its group's forms."""
        from queueguard.engine.apply import runner
        from queueguard.engine.plan import planner

        mset, start = online_upgrade.settle(self.mset, dsn, limits, self.options, self.tell)
        if not mset.pending(planner.current_revision(mset, dsn), self.to):
            return runner.upgrade(mset, dsn, to=self.to, limits=limits, stop=stop)
        prepared = None if start else self.prepared(target)
        if prepared is None:  # part applied by a killed run, or in no group: its own
            prepared = online_upgrade.prepare(
                mset, dsn, to=self.to, budget_ms=self.budget_ms, force=self.force,
                options=self.options, scratch_admin=self.scratch_admin, start=start,
                tell=self.tell,
            )  # fmt: skip
        return runner.upgrade(
            prepared.mset, dsn, to=self.to, limits=limits, online=prepared.online, stop=stop
        )
