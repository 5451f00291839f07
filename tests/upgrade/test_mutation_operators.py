"""The mutation operators on golden pairs: input statement → exactly the mutated statements
each produces (whitespace collapsed), and what generation guarantees (bytes kept, order,
de-duplication, re-parsing, stable ids). Pure code: no database."""

from __future__ import annotations

import json

import pytest

from queueguard import revisions
from queueguard.cli import main
from queueguard.mutate.generate import generate, mutants_of
from queueguard.mutate.model import Mutant, normalise
from queueguard.mutate.operators import OPERATORS, Change, Operator, select
from queueguard.mutate.sites import from_texts, is_online

STEP = "sql/009/01_step.sql"


def mutants(operator: str, sql: str) -> list[Mutant]:
    return mutants_of(from_texts("009", {STEP: sql + ";\n"}), select([operator]))


def mutated(operator: str, sql: str) -> list[str]:
    return [normalise(m.mutated) for m in mutants(operator, sql)]


GOLDEN: list[tuple[str, str, list[str]]] = [
    # drop-conjunct: each AND operand of WHERE / ON; one condition: the whole WHERE, or ON TRUE
    (
        "drop-conjunct",
        "UPDATE t SET a = 1 WHERE x = 1 AND y > 2 AND z IS NULL",
        [
            "UPDATE t SET a = 1 WHERE y > 2 AND z IS NULL",
            "UPDATE t SET a = 1 WHERE x = 1 AND z IS NULL",
            "UPDATE t SET a = 1 WHERE x = 1 AND y > 2",
        ],
    ),
    ("drop-conjunct", "DELETE FROM t WHERE x = 1", ["DELETE FROM t"]),
    (
        "drop-conjunct",
        "SELECT * FROM a JOIN b ON a.id = b.id AND (b.k = 'x' AND b.n > 0)",
        [
            "SELECT * FROM a JOIN b ON b.k = 'x' AND b.n > 0",
            "SELECT * FROM a JOIN b ON a.id = b.id AND b.n > 0",
            "SELECT * FROM a JOIN b ON a.id = b.id AND b.k = 'x'",
        ],
    ),
    (
        "drop-conjunct",
        "SELECT * FROM a LEFT JOIN b ON a.id = b.id",
        ["SELECT * FROM a LEFT JOIN b ON TRUE"],
    ),
    ("drop-conjunct", "SELECT * FROM a LEFT JOIN LATERAL (SELECT 1) b ON true", []),
    ("drop-conjunct", "SELECT * FROM t WHERE a = 1 AND a = 1", ["SELECT * FROM t WHERE a = 1"]),
    # flip-comparison: never the `=` of a SET assignment
    ("flip-comparison", "UPDATE t SET a = 1 WHERE b = 2", ["UPDATE t SET a = 1 WHERE b <> 2"]),
    ("flip-comparison", "SELECT * FROM t WHERE a <> b", ["SELECT * FROM t WHERE a = b"]),
    (
        "flip-comparison",
        "SELECT * FROM t WHERE a < b",
        ["SELECT * FROM t WHERE a <= b", "SELECT * FROM t WHERE a > b"],
    ),
    (
        "flip-comparison",
        "SELECT * FROM t WHERE a <= b",
        ["SELECT * FROM t WHERE a < b", "SELECT * FROM t WHERE a >= b"],
    ),
    (
        "flip-comparison",
        "SELECT * FROM t WHERE a > b",
        ["SELECT * FROM t WHERE a >= b", "SELECT * FROM t WHERE a < b"],
    ),
    (
        "flip-comparison",
        "SELECT * FROM t WHERE a >= b",
        ["SELECT * FROM t WHERE a > b", "SELECT * FROM t WHERE a <= b"],
    ),
    (
        "flip-comparison",
        "SELECT * FROM t WHERE a IS NULL AND b IS NOT NULL",
        [
            "SELECT * FROM t WHERE a IS NOT NULL AND b IS NOT NULL",
            "SELECT * FROM t WHERE a IS NULL AND b IS NULL",
        ],
    ),
    (
        "flip-comparison",
        "INSERT INTO t (k, v) VALUES (1, 2) ON CONFLICT (k) DO UPDATE SET v = excluded.v",
        [],
    ),
    # negate-predicate
    (
        "negate-predicate",
        "SELECT * FROM t WHERE NOT EXISTS (SELECT 1 FROM u)",
        ["SELECT * FROM t WHERE EXISTS( SELECT 1 FROM u )"],
    ),
    (
        "negate-predicate",
        "SELECT * FROM t WHERE a IN (1, 2) AND b LIKE 'x%'",
        [
            "SELECT * FROM t WHERE NOT a IN (1, 2) AND b LIKE 'x%'",
            "SELECT * FROM t WHERE a IN (1, 2) AND NOT b LIKE 'x%'",
        ],
    ),
    # join-kind
    (
        "join-kind",
        "SELECT * FROM a LEFT JOIN b ON a.id = b.id JOIN c ON c.id = a.id",
        [
            "SELECT * FROM a JOIN b ON a.id = b.id JOIN c ON c.id = a.id",
            "SELECT * FROM a LEFT JOIN b ON a.id = b.id LEFT JOIN c ON c.id = a.id",
        ],
    ),
    (
        "join-kind",
        "SELECT * FROM a LEFT OUTER JOIN b ON a.id = b.id",
        ["SELECT * FROM a JOIN b ON a.id = b.id"],
    ),
    ("join-kind", "SELECT * FROM a CROSS JOIN b", []),
    # off-by-one: integer constants ±1; arithmetic without a constant operand ±1
    (
        "off-by-one",
        "UPDATE t SET a = a + 1, b = x - y",
        [
            "UPDATE t SET a = a + 2, b = x - y",
            "UPDATE t SET a = a + 0, b = x - y",
            "UPDATE t SET a = a + 1, b = x - y + 1",
            "UPDATE t SET a = a + 1, b = x - y - 1",
        ],
    ),
    (
        "off-by-one",
        "SELECT a * (b + c) FROM t",
        ["SELECT a * ( b + c + 1 ) FROM t", "SELECT a * ( b + c - 1 ) FROM t"],
    ),
    (
        "off-by-one",
        "SELECT a - b - c FROM t",
        [
            "SELECT a - b - c + 1 FROM t",
            "SELECT a - b - c - 1 FROM t",
            "SELECT ( a - b + 1 ) - c FROM t",
            "SELECT ( a - b - 1 ) - c FROM t",
        ],
    ),
    (  # not the select list of EXISTS (never read), not ORDER BY 1 (a position)
        "off-by-one",
        "SELECT 1 FROM t WHERE NOT EXISTS (SELECT 1 FROM u WHERE u.n > 0) ORDER BY 1",
        [
            "SELECT 2 FROM t WHERE NOT EXISTS( SELECT 1 FROM u WHERE u.n > 0 ) ORDER BY 1",
            "SELECT 0 FROM t WHERE NOT EXISTS( SELECT 1 FROM u WHERE u.n > 0 ) ORDER BY 1",
            "SELECT 1 FROM t WHERE NOT EXISTS( SELECT 1 FROM u WHERE u.n > 1 ) ORDER BY 1",
            "SELECT 1 FROM t WHERE NOT EXISTS( SELECT 1 FROM u WHERE u.n > -1 ) ORDER BY 1",
        ],
    ),
    ("off-by-one", "SELECT now() - INTERVAL '1 day', a || 'x' FROM t", []),
    # replace-default: NULL; strings '' ('{}' for a JSON object); booleans negated
    (
        "replace-default",
        "CREATE TABLE q (a INT DEFAULT 0, b TEXT DEFAULT 'x', c JSONB DEFAULT '{\"k\": 1}', "
        "d BOOLEAN DEFAULT TRUE, e TIMESTAMPTZ DEFAULT now())",
        [
            "CREATE TABLE q ( a INT DEFAULT NULL, b TEXT DEFAULT 'x', c JSONB DEFAULT "
            "'{\"k\": 1}', d BOOLEAN DEFAULT TRUE, e TIMESTAMPTZ DEFAULT CURRENT_TIMESTAMP )",
            "CREATE TABLE q ( a INT DEFAULT 0, b TEXT DEFAULT NULL, c JSONB DEFAULT "
            "'{\"k\": 1}', d BOOLEAN DEFAULT TRUE, e TIMESTAMPTZ DEFAULT CURRENT_TIMESTAMP )",
            "CREATE TABLE q ( a INT DEFAULT 0, b TEXT DEFAULT '', c JSONB DEFAULT "
            "'{\"k\": 1}', d BOOLEAN DEFAULT TRUE, e TIMESTAMPTZ DEFAULT CURRENT_TIMESTAMP )",
            "CREATE TABLE q ( a INT DEFAULT 0, b TEXT DEFAULT 'x', c JSONB DEFAULT NULL, "
            "d BOOLEAN DEFAULT TRUE, e TIMESTAMPTZ DEFAULT CURRENT_TIMESTAMP )",
            "CREATE TABLE q ( a INT DEFAULT 0, b TEXT DEFAULT 'x', c JSONB DEFAULT '{}', "
            "d BOOLEAN DEFAULT TRUE, e TIMESTAMPTZ DEFAULT CURRENT_TIMESTAMP )",
            "CREATE TABLE q ( a INT DEFAULT 0, b TEXT DEFAULT 'x', c JSONB DEFAULT "
            "'{\"k\": 1}', d BOOLEAN DEFAULT NULL, e TIMESTAMPTZ DEFAULT CURRENT_TIMESTAMP )",
            "CREATE TABLE q ( a INT DEFAULT 0, b TEXT DEFAULT 'x', c JSONB DEFAULT "
            "'{\"k\": 1}', d BOOLEAN DEFAULT FALSE, e TIMESTAMPTZ DEFAULT CURRENT_TIMESTAMP )",
        ],
    ),
    (
        "replace-default",
        "SELECT coalesce(a, b, 'x'), coalesce(c, d) FROM t",
        [
            "SELECT COALESCE(a, b, NULL), COALESCE(c, d) FROM t",
            "SELECT COALESCE(a, b, ''), COALESCE(c, d) FROM t",
        ],
    ),
    (
        "replace-default",
        "ALTER TABLE t ALTER COLUMN a SET DEFAULT 'on'",
        [
            "ALTER TABLE t ALTER COLUMN a SET DEFAULT NULL",
            "ALTER TABLE t ALTER COLUMN a SET DEFAULT ''",
        ],
    ),
    # jsonb-key: path arrays, -> / ->>, #>>, jsonb_build_object keys
    (
        "jsonb-key",
        "SELECT jsonb_set(d, '{task,runId}', v), d -> 'task' ->> 'runId', "
        "jsonb_build_object('k', 1, 'n', x), d #>> '{a,b}' FROM t",
        [
            "SELECT JSONB_SET(d, '{task_mutant,runId}', v), d -> 'task' ->> 'runId', "
            "JSONB_BUILD_OBJECT('k', 1, 'n', x), d #>> '{a,b}' FROM t",
            "SELECT JSONB_SET(d, '{task,runId_mutant}', v), d -> 'task' ->> 'runId', "
            "JSONB_BUILD_OBJECT('k', 1, 'n', x), d #>> '{a,b}' FROM t",
            "SELECT JSONB_SET(d, '{task,runId}', v), d -> 'task_mutant' ->> 'runId', "
            "JSONB_BUILD_OBJECT('k', 1, 'n', x), d #>> '{a,b}' FROM t",
            "SELECT JSONB_SET(d, '{task,runId}', v), d -> 'task' ->> 'runId_mutant', "
            "JSONB_BUILD_OBJECT('k', 1, 'n', x), d #>> '{a,b}' FROM t",
            "SELECT JSONB_SET(d, '{task,runId}', v), d -> 'task' ->> 'runId', "
            "JSONB_BUILD_OBJECT('k_mutant', 1, 'n', x), d #>> '{a,b}' FROM t",
            "SELECT JSONB_SET(d, '{task,runId}', v), d -> 'task' ->> 'runId', "
            "JSONB_BUILD_OBJECT('k', 1, 'n_mutant', x), d #>> '{a,b}' FROM t",
            "SELECT JSONB_SET(d, '{task,runId}', v), d -> 'task' ->> 'runId', "
            "JSONB_BUILD_OBJECT('k', 1, 'n', x), d #>> '{a_mutant,b}' FROM t",
            "SELECT JSONB_SET(d, '{task,runId}', v), d -> 'task' ->> 'runId', "
            "JSONB_BUILD_OBJECT('k', 1, 'n', x), d #>> '{a,b_mutant}' FROM t",
        ],
    ),
    # swap-extremum
    (
        "swap-extremum",
        "SELECT max(a), least(b, c) FROM t",
        ["SELECT MIN(a), LEAST(b, c) FROM t", "SELECT MAX(a), GREATEST(b, c) FROM t"],
    ),
    # swap-items: adjacent values; output names kept where names matter (not INSERT … SELECT)
    (
        "swap-items",
        "SELECT a, b AS y, f(c) FROM t",
        ["SELECT b AS a, a AS y, F(c) FROM t", "SELECT a, F(c) AS y, b FROM t"],
    ),
    (
        "swap-items",
        "INSERT INTO t (a, b) SELECT x, y FROM u",
        ["INSERT INTO t ( a, b ) SELECT y, x FROM u"],
    ),
    ("swap-items", "UPDATE t SET a = 1, b = 2, c = 2", ["UPDATE t SET a = 2, b = 1, c = 2"]),
    ("swap-items", "SELECT 1 FROM t WHERE EXISTS (SELECT a, b FROM u)", []),
    # swap-order: windows too; NULLS placement follows the direction unless written
    (
        "swap-order",
        "SELECT row_number() OVER (PARTITION BY p ORDER BY a), b FROM t "
        "ORDER BY b DESC, c NULLS FIRST",
        [
            "SELECT ROW_NUMBER() OVER (PARTITION BY p ORDER BY a DESC), b FROM t "
            "ORDER BY b DESC, c NULLS FIRST",
            "SELECT ROW_NUMBER() OVER (PARTITION BY p ORDER BY a), b FROM t "
            "ORDER BY b ASC, c NULLS FIRST",
            "SELECT ROW_NUMBER() OVER (PARTITION BY p ORDER BY a), b FROM t "
            "ORDER BY b DESC, c DESC",
        ],
    ),
    ("swap-order", "INSERT INTO t (k) VALUES (1) ON CONFLICT (k) DO NOTHING", []),
    # widen-lock: the next stronger mode and ACCESS EXCLUSIVE (LOCK is a raw Command)
    (
        "widen-lock",
        "LOCK TABLE t IN ROW EXCLUSIVE MODE",
        ["LOCK TABLE t IN SHARE UPDATE EXCLUSIVE MODE", "LOCK TABLE t IN ACCESS EXCLUSIVE MODE"],
    ),
    ("widen-lock", "LOCK t IN EXCLUSIVE MODE", ["LOCK t IN ACCESS EXCLUSIVE MODE"]),
    ("widen-lock", "LOCK TABLE t", []),  # ACCESS EXCLUSIVE already
]


@pytest.mark.parametrize(
    ("operator", "sql", "expected"),
    GOLDEN,
    ids=[f"{op}-{n}" for n, (op, _, _) in enumerate(GOLDEN)],
)
def test_golden_pairs(operator: str, sql: str, expected: list[str]) -> None:
    assert mutated(operator, sql) == expected


def test_every_operator_has_golden_pairs() -> None:
    covered = {op for op, _, _ in GOLDEN} | {"drop-statement", "add-lock"}
    assert covered == {op.name for op in OPERATORS}


def test_drop_statement_removes_the_statement_and_its_semicolon_only() -> None:
    text = "-- head\nSELECT 1;\n\n-- the update\nUPDATE t SET a = 1; -- trailing\nSELECT 2;\n"
    found = mutants_of(from_texts("009", {STEP: text}), select(["drop-statement"]))
    assert [m.text for m in found] == [
        "-- head\n\n-- the update\nUPDATE t SET a = 1; -- trailing\nSELECT 2;\n",
        "-- head\nSELECT 1;\n\n-- the update\n -- trailing\nSELECT 2;\n",
        "-- head\nSELECT 1;\n\n-- the update\nUPDATE t SET a = 1; -- trailing\n",
    ]
    assert [m.mutated for m in found] == ["", "", ""]


def test_add_lock_locks_each_table_the_revision_only_reads_after_its_last_lock() -> None:
    files = {
        "sql/009/00_locks.sql": "LOCK TABLE tasks IN ACCESS EXCLUSIVE MODE;\n",
        STEP: "UPDATE tasks SET x = (SELECT max(s.v) FROM scheduled_tasks s "
        "JOIN executions e ON e.run_id = s.run_id);\n",
    }
    found = mutants_of(from_texts("009", files), select(["add-lock"]))
    assert [normalise(m.mutated) for m in found] == [
        "LOCK TABLE tasks IN ACCESS EXCLUSIVE MODE; LOCK TABLE executions IN ACCESS EXCLUSIVE MODE",
        "LOCK TABLE tasks IN ACCESS EXCLUSIVE MODE; "
        "LOCK TABLE scheduled_tasks IN ACCESS EXCLUSIVE MODE",
    ]
    assert found[0].text == (
        "LOCK TABLE tasks IN ACCESS EXCLUSIVE MODE;\n"
        "LOCK TABLE executions IN ACCESS EXCLUSIVE MODE;\n"
    )


def test_add_lock_without_locks_goes_before_the_first_statement() -> None:
    found = mutants("add-lock", "UPDATE task_queue_user_data SET version = version + 1")
    assert [normalise(m.mutated) for m in found] == [
        "LOCK TABLE executions IN ACCESS EXCLUSIVE MODE; "
        "UPDATE task_queue_user_data SET version = version + 1"
    ]


def test_ctas_keeps_its_prefix_and_mutates_the_query() -> None:
    sql = "CREATE TEMP TABLE plan ON COMMIT DROP AS\nSELECT a FROM t WHERE b = 1"
    (found,) = mutants("flip-comparison", sql)
    assert found.mutated.startswith("CREATE TEMP TABLE plan ON COMMIT DROP AS\n")
    assert normalise(found.mutated).endswith("SELECT a FROM t WHERE b <> 1")


def test_only_the_statement_span_changes() -> None:
    text = (
        "-- a comment; with a semicolon\nSELECT  1 ;\n/* block */ UPDATE t SET a = 1 WHERE b = 2;\n"
    )
    found = mutants_of(from_texts("009", {STEP: text}), select(["flip-comparison"]))
    (mutant,) = found
    start = text.index("UPDATE")
    end = text.index(";\n", start)
    assert mutant.text[:start] == text[:start]
    assert mutant.text[-len(text[end:]) :] == text[end:]
    assert mutant.line == 3 and mutant.statement == 1


def test_unparsable_and_no_op_changes_are_skipped() -> None:
    def broken(site: object, _: object) -> list[Change]:
        return [
            Change("SELECT a FROM t WHERE", "not SQL", "", tree=True),
            Change("SELECT 'unterminated", "a bad token", ""),
            Change("SELECT 1", "no change", ""),
        ]

    sites = from_texts("009", {STEP: "SELECT 1;\n"})
    assert mutants_of(sites, [Operator("broken", "", broken)]) == []


def test_ids_are_stable_across_layout_and_order_is_deterministic() -> None:
    one = mutants_of(from_texts("009", {STEP: "UPDATE t SET a = 1 WHERE b = 2 AND c > 3;\n"}))
    two = mutants_of(
        from_texts("009", {STEP: "-- moved\n\nUPDATE t\n   SET a = 1\n WHERE b = 2 AND c > 3;\n"})
    )
    assert [m.id for m in one] == [m.id for m in two]
    assert len({m.id for m in one}) == len(one)


@pytest.mark.slow
def test_004_yields_at_least_60_distinct_mutants(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["mutate", "004", "--list", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    ids = [m["id"] for m in doc["mutants"]]
    texts = {(m["file"], m["statement"], m["mutated"]) for m in doc["mutants"]}
    assert doc["schemaVersion"] == 1 and doc["revision"] == "004"
    assert len(set(ids)) == len(ids) == len(texts) >= 60
    assert set(doc["operators"]) == {op.name for op in OPERATORS} - {"widen-lock"}
    steps = [m.id for m in generate(revisions.packaged(), "004") if not is_online(m.file)]
    assert ids == steps  # --scope steps by default
    assert main(["mutate", "004", "--list"]) == 0
    text = capsys.readouterr().out
    assert f"{len(ids)} mutants of 004" in text


@pytest.mark.slow
def test_the_repository_equivalence_file_matches_004() -> None:
    """Every reviewed equivalent mutant still exists (none stale) and has a reason."""
    from queueguard.mutate import equivalents

    migrations = revisions.packaged()
    entries = equivalents.load(equivalents.default_path(migrations.root))
    matched = equivalents.match(entries, generate(migrations, "004"), "004")
    assert entries and matched.stale == ()
    assert len(matched.equivalent) == len(entries)
    assert all(e.reason for e in entries)


@pytest.mark.slow
def test_add_lock_is_judged_per_part_and_only_for_tables_read() -> None:
    """The step files and the online path each get their own add-lock, after their own last
    LOCK, for tables read in a FROM or JOIN only (not FOR UPDATE OF aliases, constraints,
    indexes or PostgreSQL's catalogs)."""
    added = {
        (m.file, m.description)
        for m in generate(revisions.packaged(), "004")
        if m.operator == "add-lock"
    }
    assert {file for file, _ in added} == {"sql/004/00_locks.sql", "sql/004/online/rollout.sql"}
    assert all("LOCK TABLE executions IN ACCESS EXCLUSIVE MODE after" in d for _, d in added)
