"""What the scenarios produce: queues spread over hosts, task identities, seeded randomness."""

from __future__ import annotations

import random
import time
from collections.abc import Sequence
from typing import Any

from queueguard.core.keys import PhysicalQueue
from queueguard.runtime.membership import StaticMembership

#: History's start timeout in the runtime scenarios' hosts (s), and the share of deliveries
#: whose completion comes only after 1.5 timeouts (a worker that outlives its start)
START_TIMEOUT, SLOW_SHARE = 2.0, 0.002


def identity(payload: dict[str, Any]) -> tuple[str, int]:
    """A task payload's identity in History: (runId, scheduledEventId)."""
    task = payload["task"]
    return (task["runId"], task["scheduledEventId"])


def queues_for(
    hosts: Sequence[str], per_host: int, namespace: str = "chaos", family: str = "orders"
) -> list[PhysicalQueue]:
    """Partitions of one family (workflow and activity alternating) until static membership
    routes `per_host` of them to every host."""
    membership = StaticMembership(tuple(hosts))
    owned: dict[str, list[PhysicalQueue]] = {h: [] for h in hosts}
    partition = 0
    while any(len(q) < per_host for q in owned.values()):
        queue = PhysicalQueue(namespace, family, ("workflow", "activity")[partition % 2], partition)
        bucket = owned[membership.owner(queue)]
        if len(bucket) < per_host:
            bucket.append(queue)
        partition += 1
        assert partition < 10_000
    return sorted(q for qs in owned.values() for q in qs)


def rng(seed: int | None) -> random.Random:
    """The scenario's randomness: seeded by `seed`, or else by the clock."""
    return random.Random(seed if seed is not None else int(time.time()))
