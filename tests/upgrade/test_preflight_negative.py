"""Negative fixtures: the golden v0.3 database broken one defect at a time.

For each `fixtures/negative/*.sql` patch: preflight exits 1 with the expected code and names the
object or sample; `queueguard upgrade` refuses; every table is byte-for-byte unchanged
(per-table checksums). Clean golden fixtures pass preflight; a head database is "nothing to
do".
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from queueguard.cli import main
from queueguard.errors import QueueguardError
from queueguard.pg import scratch
from queueguard.queue_schema import golden
from queueguard.queue_schema.preflight import preflight, render_text
from queueguard.queue_schema.runner import upgrade

from .preflight_support import checksums, execute

Defect = golden.NegativeCase
DEFECTS = golden.negative_cases()


def _template(admin: str, fixture: str) -> Iterator[str]:
    dsn = scratch.create_database(admin, prefix="qgtpl")
    golden.load(golden.get(fixture), dsn)
    name = scratch.dbname_of(dsn)
    yield name
    scratch.drop_database(admin, name)


@pytest.fixture(scope="session")
def golden_v03_template(pg_admin_dsn: str) -> Iterator[str]:
    yield from _template(pg_admin_dsn, "v0.3")


def test_there_is_a_negative_fixture_per_defect_kind() -> None:
    assert len(DEFECTS) >= 10
    expected = {d.expect for d in DEFECTS}
    assert {
        "data.payload_shape",
        "data.task_without_queue",
        "data.queue_key_invalid",
        "schema.revision_unknown",
        "schema.column_missing",
    } <= expected


@pytest.mark.parametrize("defect", DEFECTS, ids=[d.path.stem for d in DEFECTS])
def test_negative_fixture_is_reported_and_refused_without_a_trace(
    defect: Defect,
    make_db: Callable[..., str],
    golden_v03_template: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    dsn = make_db(template=golden_v03_template)
    execute(dsn, defect.path.read_text(encoding="utf-8"))
    before = checksums(dsn)

    report = preflight(dsn)
    assert defect.expect in report.codes("blocking"), render_text(report)
    assert main(["preflight", "--dsn", dsn]) == 1
    out = capsys.readouterr().out
    assert defect.expect in out and defect.names in out  # the object or a sample is named
    finding = next(f for f in report.findings if f.code == defect.expect)
    assert finding.message and finding.count >= 1

    with pytest.raises(QueueguardError) as refused:
        upgrade(dsn, progress=False)
    assert "nothing was changed" in str(refused.value) or defect.expect.startswith("schema.")
    if defect.guarded:
        # the guard's refusal names the same code, object and samples
        assert defect.expect in str(refused.value) and defect.names in str(refused.value)
    assert checksums(dsn) == before  # byte-for-byte: every table, and the catalog


@pytest.mark.parametrize("fixture", ["v0.1", "v0.2", "v0.3"])
def test_clean_golden_fixtures_pass(
    fixture: str, make_db: Callable[..., str], capsys: pytest.CaptureFixture[str]
) -> None:
    dsn = make_db()
    golden.load(golden.get(fixture), dsn)
    before = checksums(dsn)
    report = preflight(dsn)
    assert report.ok, render_text(report)
    assert report.revision == golden.get(fixture).revision
    assert main(["preflight", "--dsn", dsn]) == 0
    assert checksums(dsn) == before
    capsys.readouterr()


def test_golden_v03_findings_match_what_the_fixture_exercises(
    make_db: Callable[..., str], golden_v03_template: str
) -> None:
    """Stale counters and unknown runs are warnings (004 handles them), never blocking."""
    dsn = make_db(template=golden_v03_template)
    report = preflight(dsn)
    assert report.ok
    assert {"data.stale_last_task_id", "data.unknown_run"} <= set(report.codes("warning"))
    relocated = next(f for f in report.findings if f.code == "estimate.rows_relocated")
    assert relocated.count > 0 and all("@auto" in s["queue"] for s in relocated.samples)


def test_after_the_upgrade_there_is_nothing_to_do(
    make_db: Callable[..., str], golden_v03_template: str
) -> None:
    dsn = make_db(template=golden_v03_template)
    upgrade(dsn, progress=False)
    report = preflight(dsn)
    assert report.ok and report.codes() == ["schema.at_head"] and report.exit_code() == 0
