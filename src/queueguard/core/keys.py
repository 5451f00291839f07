"""Physical queue keys: the frozen, injective text encoding released in v0.3.

`quote(namespace)/quote(task_queue)/task_type/partition[@quote(version)]`, where `quote` is
`urllib.parse.quote(s, safe='')` over UTF-8. Only canonical keys are valid: decoding a key and
encoding its components again must give the same string.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import quote, unquote

from queueguard.core import jsonb
from queueguard.errors import InvalidQueueKey

TASK_TYPES = ("workflow", "activity")
#: The reserved pseudo-version that held auto-upgrade backlogs before 004.
AUTO_VERSION = "auto"
_PARTITION = re.compile(r"0|[1-9][0-9]*")
#: `partition` is an `int` column (int4) in every released schema.
MAX_PARTITION = 2**31 - 1
_QUOTED = re.compile(r"(?:[A-Za-z0-9_.~-]|%[0-9A-F]{2})+")


def _quote(s: str) -> str:
    return quote(s, safe="")


@dataclass(frozen=True, order=True)
class PhysicalQueue:
    """One physical queue: namespace, family, task type, partition and version."""

    namespace: str
    task_queue: str
    task_type: str = "workflow"
    partition: int = 0
    version: str = ""

    def __post_init__(self) -> None:
        validate_components(
            self.namespace, self.task_queue, self.task_type, self.partition, self.version
        )

    @property
    def key(self) -> str:
        """The canonical text key stored in `task_queues.physical_queue` and `tasks`."""
        base = (
            f"{_quote(self.namespace)}/{_quote(self.task_queue)}/{self.task_type}/{self.partition}"
        )
        return f"{base}@{_quote(self.version)}" if self.version else base

    @property
    def partition_key(self) -> tuple[str, str, str, int]:
        """What membership routes: every version of one partition lives on one host."""
        return (self.namespace, self.task_queue, self.task_type, self.partition)

    def with_version(self, version: str) -> PhysicalQueue:
        return PhysicalQueue(
            self.namespace, self.task_queue, self.task_type, self.partition, version
        )

    def __str__(self) -> str:
        return self.key


def validate_components(
    namespace: str,
    task_queue: str,
    task_type: str,
    partition: int,
    version: str,
    *,
    allow_auto: bool = False,
) -> None:
    """Raise InvalidQueueKey unless the components can form a valid key."""
    if not isinstance(namespace, str) or not namespace:
        raise InvalidQueueKey("namespace must be a non-empty string")
    if not isinstance(task_queue, str) or not task_queue:
        raise InvalidQueueKey("task queue name must be a non-empty string")
    if task_type not in TASK_TYPES:
        raise InvalidQueueKey(f"unknown task type {task_type!r} (expected workflow or activity)")
    if (
        isinstance(partition, bool)
        or not isinstance(partition, int)
        or not 0 <= partition <= MAX_PARTITION
    ):
        raise InvalidQueueKey(f"partition must be an integer in [0, 2^31-1], got {partition!r}")
    if not isinstance(version, str):
        raise InvalidQueueKey("version must be a string")
    for name in (namespace, task_queue, version):
        _require_storable(name)
    if version == AUTO_VERSION:
        if not allow_auto:
            raise InvalidQueueKey("the 'auto' pseudo-version is legacy (pre-004) only")
    elif version and "." not in version:
        raise InvalidQueueKey(
            f"version {version!r} is not a deployment version (deploymentName.buildId)"
        )


def _require_storable(name: str) -> None:
    why = jsonb.text_problem(name)
    if why is not None:
        raise InvalidQueueKey(f"name {name!r} {why}")


def legacy_queue(
    namespace: str, task_queue: str, task_type: str, partition: int, version: str
) -> str:
    """Encode a key that may carry the legacy `auto` version (reading v0.3 data only)."""
    validate_components(namespace, task_queue, task_type, partition, version, allow_auto=True)
    base = f"{_quote(namespace)}/{_quote(task_queue)}/{task_type}/{partition}"
    return f"{base}@{_quote(version)}" if version else base


def decode(key: str, *, allow_auto: bool = False) -> PhysicalQueue | tuple[str, str, str, int, str]:
    """Decode a canonical key; non-canonical spellings raise InvalidQueueKey.

    Returns a PhysicalQueue, or a plain component tuple for a legacy `@auto` key when
    `allow_auto` is set (such a queue can no longer be constructed).
    """
    head, at, raw_version = key.partition("@")
    parts = head.split("/")
    if len(parts) != 4 or (at and not raw_version):
        raise InvalidQueueKey(f"malformed queue key {key!r}")
    raw_ns, raw_tq, task_type, raw_partition = parts
    for raw in (raw_ns, raw_tq) + ((raw_version,) if at else ()):
        if not _QUOTED.fullmatch(raw):
            raise InvalidQueueKey(f"queue key {key!r} is not canonically quoted")
    if not _PARTITION.fullmatch(raw_partition):
        raise InvalidQueueKey(f"queue key {key!r} has a non-canonical partition")
    try:
        namespace = unquote(raw_ns, errors="strict")
        task_queue = unquote(raw_tq, errors="strict")
        version = unquote(raw_version, errors="strict") if at else ""
    except UnicodeDecodeError as exc:
        raise InvalidQueueKey(f"queue key {key!r} is not UTF-8") from exc
    components = (namespace, task_queue, task_type, int(raw_partition), version)
    validate_components(*components, allow_auto=allow_auto)
    canonical = legacy_queue(*components)
    if canonical != key:
        raise InvalidQueueKey(f"queue key {key!r} is not canonical (expected {canonical!r})")
    if version == AUTO_VERSION:
        return components
    return PhysicalQueue(*components)
