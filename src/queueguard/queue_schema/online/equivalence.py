"""How an online end state compares with offline 004's on the same input (docs/upgrade.md,
"Online and offline: what differs").

Quiescent input (no host running): equal, except that each legacy `@auto` queue that held rows
ends with a higher range online (the migrator fences it before its first move; contract fences
it again, as offline 004 fences every queue once). Ranges are fences, not counters: only their
order matters. Under load the ids depend on how the writers interleaved, so what is compared
is each source queue's order and the multiset of (queue family, payload without its directive,
directive).
"""

from __future__ import annotations

import copy
import json
from collections import Counter
from typing import Any

from queueguard.core.keys import AUTO_VERSION, decode
from queueguard.snapshot import normalise

Doc = dict[str, Any]
_AUTO = "@" + AUTO_VERSION


def quiescent_differences(
    offline: Doc, online: Doc, *, sources: set[str] | None = None, limit: int = 20
) -> list[str]:
    """What differs between the two end states beyond the documented range difference.

    `sources`: the legacy @auto queues that held rows before the rollout; each must end with
    exactly one more fence than offline (without it: any @auto queue may end higher)."""
    a, b = normalise(offline), normalise(online)
    problems = [f"{part} differs" for part in a if part != "queues" and a[part] != b.get(part)]
    queues_a = {q["physicalQueue"]: q for q in a["queues"]}
    queues_b = {q["physicalQueue"]: q for q in b["queues"]}
    for key in sorted(queues_a.keys() ^ queues_b.keys()):
        problems.append(f"{key}: only {'offline' if key in queues_a else 'online'}")
    for key in sorted(queues_a.keys() & queues_b.keys()):
        qa, qb = queues_a[key], queues_b[key]
        for field in ("ackLevel", "lastTaskId", "tasks"):
            if qa[field] != qb[field]:
                problems.append(
                    f"{key}: {field} offline {_short(qa[field])} online {_short(qb[field])}"
                )
        if sources is not None:
            expected_ok = qb["rangeId"] == qa["rangeId"] + (1 if key in sources else 0)
        else:
            higher_auto = key.endswith(_AUTO) and qa["rangeId"] <= qb["rangeId"]
            expected_ok = qa["rangeId"] == qb["rangeId"] or higher_auto
        if not expected_ok:
            problems.append(f"{key}: rangeId offline {qa['rangeId']} online {qb['rangeId']}")
    return problems[:limit]


def _short(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= 160 else text[:157] + "..."


def _family(key: str) -> tuple[str, str, str, int]:
    queue = decode(key, allow_auto=True)
    if isinstance(queue, tuple):
        return queue[0], queue[1], queue[2], queue[3]
    return queue.namespace, queue.task_queue, queue.task_type, queue.partition


def task_multiset(doc: Doc) -> Counter[tuple[Any, ...]]:
    """(queue family, payload without directive, directive) of every stored task."""
    found: Counter[tuple[Any, ...]] = Counter()
    for queue in doc["queues"]:
        family = _family(queue["physicalQueue"])
        for task in queue["tasks"]:
            data = copy.deepcopy(task["data"])
            inner = data.get("task") if isinstance(data, dict) else None
            directive = inner.pop("versionDirective", None) if isinstance(inner, dict) else None
            found[(*family, _canonical(data), _canonical(directive))] += 1
    return found


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)
