"""Static membership: a fixed host list routes each partition to exactly one host.

Membership is static, not consensus: two processes configured with different host lists can
take a queue from each other repeatedly; the range fence keeps that safe, not fast.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from queueguard.core.keys import PhysicalQueue


@dataclass(frozen=True)
class StaticMembership:
    hosts: tuple[str, ...]

    def __post_init__(self) -> None:
        if not self.hosts or len(set(self.hosts)) != len(self.hosts):
            raise ValueError("membership needs a non-empty list of distinct hosts")

    def owner(self, queue: PhysicalQueue) -> str:
        """Every version of one partition routes to the same host (stable hash)."""
        digest = hashlib.sha256(repr(queue.partition_key).encode()).digest()
        return self.hosts[int.from_bytes(digest[:8], "big") % len(self.hosts)]
