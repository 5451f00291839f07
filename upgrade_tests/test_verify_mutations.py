"""`queueguard verify` catches a migration that loses a row or changes a payload.

Each test mutates a copy of the migration set (never the real one), regenerates the copy's
manifest, runs verify on the copy (`migrations=`, the API behind `--migrations DIR`) and
expects it to fail with a readable diff against the golden state.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from queueguard import revisions
from queueguard.pg import scratch
from queueguard.queue_schema import manifest
from queueguard.queue_schema.verify import verify
from queueguard.queue_schema.verify.report import render
from queueguard.resources import migrations_dir

#: each test runs verify whole on a mutated copy of the set: tens of seconds
pytestmark = pytest.mark.slow

DROP_ONE_RELOCATED_ROW = """
-- mutation: lose the last relocated row of the first destination
DELETE FROM tasks t
USING (SELECT destination, base_id + moved AS last_id FROM relocation
       ORDER BY destination LIMIT 1) r
WHERE t.physical_queue = r.destination AND t.task_id = r.last_id;
"""

CHANGE_ONE_PAYLOAD = """
-- mutation: change one kept payload beyond the directive
UPDATE tasks SET data = jsonb_set(data, '{task,attempt}', '2')
WHERE (physical_queue, task_id) = (SELECT physical_queue, min(task_id) FROM tasks
                                   GROUP BY physical_queue ORDER BY physical_queue LIMIT 1);
"""


@pytest.fixture
def mutated(tmp_path: Path) -> Path:
    """A copy of the migration set (verified instead of the shipped one)."""
    root = tmp_path / "migrations"
    shutil.copytree(migrations_dir(), root, ignore=shutil.ignore_patterns("__pycache__"))
    return root


def _mutate(root: Path, step: str, sql: str) -> None:
    path = root / "sql" / "004" / step
    path.write_text(path.read_text() + sql)
    manifest.write(root)  # a deliberate edit: the tamper check is not what is tested here


@pytest.mark.parametrize(
    ("step", "sql", "expect"),
    [
        ("03_relocate.sql", DROP_ONE_RELOCATED_ROW, '-     "taskId": 8'),
        ("02_directives.sql", CHANGE_ONE_PAYLOAD, '+       "attempt": 2,'),
    ],
    ids=["relocated-row-lost", "payload-changed"],
)
def test_verify_fails_with_a_readable_diff(
    mutated: Path, queueguard_server: str, step: str, sql: str, expect: str
) -> None:
    _mutate(mutated, step, sql)
    report = verify(queueguard_server, ["v0.3"], preflight=None, migrations=revisions.load(mutated))
    assert not report.ok
    golden = next(c for c in report.results[0].checks if c.name == "golden")
    assert not golden.ok
    assert golden.detail.startswith("--- golden\n+++ upgraded")
    assert expect in golden.detail.splitlines(), golden.detail
    assert "VERIFY FAILED" in render(report)


def test_unmutated_copy_passes(mutated: Path, queueguard_server: str) -> None:
    report = verify(queueguard_server, ["v0.3"], preflight=None, migrations=revisions.load(mutated))
    assert report.ok, render(report)
    assert scratch.dbname_of(queueguard_server) == "postgres"


def test_a_mutated_create_is_caught_by_the_frozen_head_catalog(
    mutated: Path, queueguard_server: str
) -> None:
    """A CREATE changes the fresh install and the upgraded database alike, so fresh-vs-upgraded
    cannot see it; the frozen head catalog (fixtures/head_catalog.json) does."""
    path = mutated / "sql" / "004" / "06_migration_ledger.sql"
    text = path.read_text()
    assert "applied_at timestamptz NOT NULL DEFAULT now()" in text
    path.write_text(text.replace("DEFAULT now()", "DEFAULT clock_timestamp()"))
    manifest.write(mutated)
    report = verify(queueguard_server, ["v0.3"], preflight=None, migrations=revisions.load(mutated))
    checks = {c.name: c for c in report.results[0].checks}
    assert checks["catalog"].ok  # fresh and upgraded agree with each other…
    assert not checks["frozen"].ok  # …but not with the released head
    assert "clock_timestamp()" in checks["frozen"].detail
    assert not report.ok


@pytest.mark.parametrize(
    ("old", "new", "expect"),
    [
        (  # a drained @auto queue keeps the lower of its counter and its last moved id
            "ELSE greatest(q.last_task_id, %(moved_max)s)",
            "ELSE least(q.last_task_id, %(moved_max)s)",
            "queueguard-edges/purged-top/workflow/0@auto: ackLevel offline 9 online 7",
        ),
        (  # equal counters are "repaired" too: the report counts them
            "WHERE q.physical_queue = b.physical_queue AND b.max_id > q.last_task_id",
            "WHERE q.physical_queue = b.physical_queue AND b.max_id >= q.last_task_id",
            "the report counts (counters repaired, rows relocated, directives)",
        ),
    ],
    ids=["drained-ack-level", "repair-count"],
)
def test_verify_catches_online_edits_only_the_edge_cases_show(
    mutated: Path, queueguard_server: str, old: str, new: str, expect: str
) -> None:
    """No golden fixture holds an @auto queue whose top rows were purged, or counts what the
    online report says it did: the online check's edge cases (`online.edges`) do."""
    path = mutated / "sql" / "004" / "online" / "migrate.sql"
    text = path.read_text()
    assert text.count(old) == 1
    path.write_text(text.replace(old, new))
    report = verify(queueguard_server, ["v0.3"], preflight=None, migrations=revisions.load(mutated))
    checks = {c.name: c for c in report.results[0].checks}
    assert checks["golden"].ok  # the offline path is untouched
    assert not checks["online"].ok and expect in checks["online"].detail, checks["online"].detail
