"""`fleet matrix`: what a CI engine reads to start N runners of one run (pure). Shards do not
split the targets: every job runs `fleet upgrade` against the same control database and the
leases share the work, so a lost job's targets are taken over and the policy (waves, stop,
caps) stays in queueguard."""

from __future__ import annotations

from typing import Any

from queueguard.errors import UsageError

#: GitHub Actions runs at most 256 jobs of one matrix
GITHUB_MATRIX_MAX = 256


def render(shards: int, engine: str) -> Any:
    if shards < 1:
        raise UsageError(f"--shards takes a number of at least 1, got {shards}")
    if engine == "github":
        if shards > GITHUB_MATRIX_MAX:
            raise UsageError(
                f"--shards {shards}: a GitHub matrix holds at most {GITHUB_MATRIX_MAX} jobs"
            )
        # no schemaVersion here: GitHub would take any other key for an axis of the matrix
        return {"include": [{"shard": i} for i in range(shards)]}
    if engine == "argo":
        return [{"shard": i} for i in range(shards)]
    # a Kubernetes Indexed Job: one pod per shard, all at once
    return {"schemaVersion": 1, "completions": shards, "parallelism": shards,
            "completionMode": "Indexed"}  # fmt: skip
