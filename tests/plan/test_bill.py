"""The downtime bill's pure parts: how a statement's sample time scales to the target
(`estimate`), how long its locks stay held (`held`), and the verdict."""

from __future__ import annotations

import math

import pytest

from queueguard.engine.plan import safer
from queueguard.engine.plan.bill import (
    PAGE,
    READ_MS_PER_PAGE,
    Line,
    Size,
    estimate,
    held,
    verdict,
)
from queueguard.engine.plan.observe import Observation

AEL, SL, REL = "AccessExclusiveLock", "ShareLock", "RowExclusiveLock"
INDEXES = {"big_pkey": "big", "big_a": "big", "parent_pkey": "parent"}
SAMPLE = {
    "big": Size(100_000, 100 * PAGE * 100, 50 * PAGE * 100, 2),
    "parent": Size(1_000, 10 * PAGE, 5 * PAGE, 1),
}
TARGET = {
    "big": Size(1_000_000, 100 * PAGE * 1000, 80 * PAGE * 1000, 2, 20 * PAGE * 1000),
    "parent": Size(1_000, 10 * PAGE, 5 * PAGE, 1),
}
LOG = math.log2(1_000_000) / math.log2(100_000)


def seen(seconds: float = 1.0, **kw: list[str]) -> Observation:
    return Observation("SQL", True, seconds, **kw)  # type: ignore[arg-type]


def ms(observation: Observation, indexes: dict[str, str] = INDEXES) -> float:
    return estimate(observation, SAMPLE, TARGET, indexes)[0]


def test_a_catalog_only_statement_costs_what_it_cost_on_the_sample() -> None:
    assert estimate(seen(0.002), SAMPLE, TARGET, INDEXES) == (
        2.0,
        "catalog only: as long as on the sample",
    )


def test_a_scan_scales_with_the_heap_alone_plus_reading_it() -> None:
    # the target's indexes grew more than its heap: a validation never reads them
    read = 100 * 1000 * READ_MS_PER_PAGE
    assert ms(seen(scans=["big"])) == pytest.approx(1000 * 10 + read)


def test_a_rewrite_scales_with_heap_toast_and_indexes_as_rebuilt_and_sorts() -> None:
    # the target's indexes (80 pages per 1,000 rows) are bloated next to the sample's freshly
    # built ones (50): the rewrite builds them again as compact as the sample's, so they count
    # at the sample's bytes per row times the target's rows
    ratio = (100 + 50 + 20) * 1000 / ((100 + 50) * 100)  # the sample has no TOAST here
    read = (100 + 20) * 1000 * READ_MS_PER_PAGE
    value, basis = estimate(seen(rewrites=["big"]), SAMPLE, TARGET, INDEXES)
    assert value == pytest.approx(1000 * ratio * LOG + read)
    assert basis.startswith("rewrites big") and "n·log n" in basis
    assert f"{(100 + 50 + 20) * 1000 * PAGE // 1024} kB" in basis


def test_a_tiny_samples_index_overhead_is_capped_at_the_targets_indexes() -> None:
    # 10 rows in two indexes' first pages: per row, a hundred times the target's bytes
    sample = {"big": Size(10, PAGE, 2 * PAGE, 2)}
    value, _ = estimate(seen(rewrites=["big"]), sample, TARGET, INDEXES)
    ratio = (100 + 80 + 20) * 1000 / 3
    read = (100 + 20) * 1000 * READ_MS_PER_PAGE
    assert value == pytest.approx(1000 * ratio * math.log2(1_000_000) / math.log2(10) + read)


def test_a_rewrite_of_a_table_without_indexes_does_not_sort() -> None:
    sample = {"t": Size(1_000, 10 * PAGE, 0, 0)}
    target = {"t": Size(10_000, 100 * PAGE, 0, 0)}
    value, basis = estimate(seen(rewrites=["t"]), sample, target, {})
    assert value == pytest.approx(1000 * 10 + 100 * READ_MS_PER_PAGE)
    assert "n·log n" not in basis


def test_a_new_index_is_a_heap_scan_and_a_sort() -> None:
    # the planner maps the index the statement created to its table
    created = seen(scans=["big"], created=["big_b"])
    assert ms(created, {**INDEXES, "big_b": "big"}) == pytest.approx(
        1000 * 10 * LOG + 100 * 1000 * READ_MS_PER_PAGE
    )


def test_reindex_of_one_index_is_an_index_build() -> None:
    assert ms(seen(rewrites=["big_a"])) == pytest.approx(
        1000 * 10 * LOG + 100 * 1000 * READ_MS_PER_PAGE
    )


def test_a_statement_over_two_tables_scales_each_part_by_its_own_table() -> None:
    # a foreign key's validation reads the child and its parent: the sample's time splits by
    # the heap bytes read (10,000 pages of big, 10 of parent); the parent's part stays as is
    value, basis = estimate(seen(scans=["big", "parent"]), SAMPLE, TARGET, INDEXES)
    assert basis.startswith("scans big") and "1 more table(s)" in basis
    read = (100 * 1000 + 10) * READ_MS_PER_PAGE
    assert value == pytest.approx(1000 * (10_000 * 10 + 10 * 1) / 10_010 + read)


def test_a_target_smaller_than_its_sample_is_not_scaled_down() -> None:
    small = {"parent": Size(1_000, 10 * PAGE, 5 * PAGE, 1)}
    value = estimate(seen(scans=["parent"]), small, {"parent": Size(10, PAGE, PAGE, 1)}, {})[0]
    assert value == pytest.approx(1000 + READ_MS_PER_PAGE)


def test_tables_only_on_one_side_are_left_out() -> None:
    assert ms(seen(0.5, created=["audit"], scans=["audit"])) == 500


def test_size_never_counts_less_than_a_page() -> None:
    empty = Size(0, 0, 0, 0)
    assert (empty.bytes, empty.heap) == (PAGE, PAGE)


def line(estimate_ms: float, transactional: bool = True, locks: list[str] | None = None) -> Line:
    observation = Observation("SQL", transactional, 0.0, locks=[("t", m) for m in locks or []])
    return Line("001", 0, observation, estimate_ms=estimate_ms)


def test_a_lock_in_a_transaction_is_held_to_its_commit() -> None:
    lines = [line(10), line(20), line(5, transactional=False), line(1), line(2)]
    held(lines)
    assert [x.held_ms for x in lines] == [30, 20, 5, 3, 2]


@pytest.mark.parametrize(
    ("locks", "held_ms", "max_lock_ms", "expected"),
    [
        ([], 10_000, 100, "ok"),
        ([REL], 10_000, 100, "ok"),
        ([AEL], 50, 100, "blocks-reads"),
        ([SL], 50, 100, "blocks-writes"),
        ([SL], 500, 100, "exceeds-max-lock"),
        ([AEL], 500, None, "blocks-reads"),
    ],
)
def test_verdict(
    locks: list[str], held_ms: float, max_lock_ms: float | None, expected: str
) -> None:
    from queueguard.engine.plan.bill import blocking

    one = line(held_ms, locks=locks)
    one.held_ms = held_ms
    one.blocking = blocking(one.seen)
    assert verdict(one, max_lock_ms) == expected


@pytest.mark.parametrize(
    ("sql", "rewrites", "scans", "advice"),
    [
        # several subcommands: each its own, the cheap ones as written
        (
            "ALTER TABLE t ADD COLUMN a int, ALTER COLUMN b SET NOT NULL",
            [],
            ["t"],
            "one ALTER TABLE per subcommand; " + safer.NOT_NULL,
        ),
        ("ALTER TABLE t ALTER COLUMN a TYPE bigint, ADD COLUMN c int", ["t"], [], None),
        (
            "ALTER TABLE t ADD COLUMN c float8 DEFAULT random(), ALTER a TYPE bigint",
            ["t"],
            [],
            None,
        ),
        ("DO $$ BEGIN UPDATE t SET a = 1; END $$", [], ["t"], None),
        ("UPDATE t SET a = %(a)s WHERE id = %(id)s", [], ["t"], None),  # the parser cannot read it
        ("ALTER TABLE t DROP COLUMN a", ["t"], [], None),
        ("ALTER TABLE t ADD CONSTRAINT u UNIQUE (a) DEFERRABLE", [], ["t"], safer.UNIQUE),
        ("ALTER TABLE t ADD CONSTRAINT f FOREIGN KEY (a) REFERENCES p NOT VALID", [], [], None),
    ],
)
def test_safer_is_chosen_from_what_the_statement_is(
    sql: str, rewrites: list[str], scans: list[str], advice: str | None
) -> None:
    line = Line("1", 0, Observation(sql, True, 1.0, [("t", AEL)], rewrites=rewrites, scans=scans))
    line.blocking = [("t", AEL)]
    expected = {
        "ALTER TABLE t ALTER COLUMN a TYPE bigint, ADD COLUMN c int": f"{safer.TYPE_CHANGE}; "
        f"{safer.NEW_COLUMN}",
        "ALTER TABLE t ADD COLUMN c float8 DEFAULT random(), ALTER a TYPE bigint": (
            f"{safer.NEW_COLUMN}; {safer.TYPE_CHANGE}"
        ),
    }.get(sql, advice)
    assert safer.safer(line) == expected
    line.blocking = []
    assert safer.safer(line) is None  # blocks no one: nothing to make safer


def test_a_target_smaller_than_the_sampled_one_is_priced_down_from_it_but_not_its_fixed_part() -> (
    None
):
    """fleet plan prices a group's smaller targets from its largest target's sample: the
    sample's time at the largest's size, then scaled down by the smaller table's share, its
    fixed part (its time on an empty copy) kept whole; without a reference a sample never
    scales below itself (earlier statements may have grown it)."""
    scan = seen(seconds=0.1, scans=["big"])
    largest = {"big": SAMPLE["big"]}
    tenth = {"big": Size(10_000, SAMPLE["big"].heap_bytes // 10, 0, 2)}
    assert estimate(scan, SAMPLE, tenth, INDEXES)[0] == pytest.approx(100 + _read_ms(tenth))
    priced = estimate(scan, SAMPLE, tenth, INDEXES, largest)[0]
    assert priced == pytest.approx(10 + _read_ms(tenth))
    fixed, basis = estimate(scan, SAMPLE, tenth, INDEXES, largest, fixed_ms=20.0)
    assert fixed == pytest.approx(20 + 80 / 10 + _read_ms(tenth))
    assert "20.0 ms of it fixed" in basis
    # a larger one than the reference is priced as plan prices it
    assert estimate(scan, SAMPLE, TARGET, INDEXES, largest)[0] == pytest.approx(ms(scan))


def _read_ms(sizes: dict[str, Size]) -> float:
    return sizes["big"].heap_bytes / PAGE * READ_MS_PER_PAGE
