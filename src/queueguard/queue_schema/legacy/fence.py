"""The fence, probed end to end: released workers started around an upgrade all fail and
change nothing."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from queueguard.errors import (
    LegacyStatementFailed,
    ProtocolMismatch,
    StaleRangeError,
)
from queueguard.queue_schema.legacy.sessions import Driver, default_driver
from queueguard.queue_schema.legacy.workers import LegacyQueue, V02Worker, V03Worker

# the fence, probed end to end -------------------------------------------------------------
PROBE_AUTO = LegacyQueue("queueguard-fence-probe", "orders", version="auto")
PROBE_DEFAULT = LegacyQueue("queueguard-fence-probe", "orders")
PROBE_TASK = {
    "task": {
        "namespace": "queueguard-fence-probe",
        "workflowId": "probe",
        "runId": "00000000-0000-0000-0000-000000000000",
        "kind": "workflow",
        "scheduledEventId": 1,
        "attempt": 1,
    },
    "enqueuedAt": "2026-01-01T00:00:00Z",
}


@dataclass
class FenceProbe:
    """What `probe_fence` saw; `ok` when every legacy call failed and nothing changed."""

    driver: Driver = "pg8000"
    ok: bool = True
    handshake_ms: float | None = None
    findings: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)

    def expect(self, what: str, call: Callable[[], object], *errors: type[BaseException]) -> None:
        try:
            call()
        except errors as exc:
            self.findings.append(f"{what}: {type(exc).__name__}")
            return
        except Exception as exc:  # an unexpected kind of failure is a failure of the probe
            self.failures.append(f"{what}: unexpected {type(exc).__name__}: {exc}")
        else:
            self.failures.append(f"{what}: succeeded, expected it to be fenced")
        self.ok = False

    @property
    def detail(self) -> str:
        head = "; ".join(self.failures) if self.failures else "; ".join(self.findings)
        timing = (
            f"; v0.3 refused at its handshake in {self.handshake_ms:.0f} ms"
            if self.handshake_ms is not None
            else ""
        )
        return f"{self.driver}: {head}{timing}"


def probe_fence(
    dsn: str,
    revision: str,
    upgrade: Callable[[str], object],
    checksums: Callable[[str], dict[str, str]],
    driver: Driver | None = None,
) -> FenceProbe:
    """On a database at an old `revision`: start the legacy hosts that run on it, call
    `upgrade(dsn)` (it must pass force: a v0.3 host stays connected), then prove every legacy
    call fails — old hosts at their next range-checked write and reload, new hosts at their
    handshake or first statement — and that `checksums(dsn)` did not change."""
    driver = driver or default_driver()
    probe = FenceProbe(driver=driver)
    old_v03 = V03Worker(dsn, host_id="fence-probe-old", driver=driver)
    old_v02 = V02Worker(dsn, host_id="fence-probe-old", driver=driver)
    try:
        if revision == old_v03.catalog.revision:
            old_v03.start()
            old_v03.load(PROBE_AUTO)
            old_v03.append(PROBE_AUTO, PROBE_TASK)
            old_v03.load(PROBE_DEFAULT)
        # a database before v0.3's schema still runs v0.2 hosts (the delivery-id spool)
        spooling = revision < old_v03.catalog.revision
        if spooling:
            old_v02.start()
            old_v02.spool(PROBE_DEFAULT, PROBE_TASK)
        upgrade(dsn)
        before = checksums(dsn)
        if old_v03.ranges:
            probe.expect(
                "old v0.3 append", lambda: old_v03.append(PROBE_AUTO, PROBE_TASK), StaleRangeError
            )
            probe.expect(
                "old v0.3 checkpoint", lambda: old_v03.checkpoint(PROBE_DEFAULT, 0), StaleRangeError
            )
            probe.expect("old v0.3 reload", lambda: old_v03.load(PROBE_AUTO), ProtocolMismatch)
        if spooling:
            probe.expect(
                "old v0.2 spool",
                lambda: old_v02.spool(PROBE_DEFAULT, PROBE_TASK),
                LegacyStatementFailed,
            )
        with V03Worker(dsn, host_id="fence-probe-new", driver=driver) as new_v03:
            started = time.perf_counter()
            probe.expect("new v0.3 start", new_v03.start, ProtocolMismatch)
            probe.handshake_ms = (time.perf_counter() - started) * 1000
        with V02Worker(dsn, host_id="fence-probe-new", driver=driver) as new_v02:
            new_v02.start()
            probe.expect(
                "new v0.2 read", lambda: new_v02.read(PROBE_DEFAULT), LegacyStatementFailed
            )
        after = checksums(dsn)
        changed = sorted(t for t in set(before) | set(after) if before.get(t) != after.get(t))
        if changed:
            probe.ok = False
            probe.failures.append(f"legacy calls changed tables {changed}")
        else:
            probe.findings.append("nothing changed")
    finally:
        old_v03.close()
        old_v02.close()
    return probe
