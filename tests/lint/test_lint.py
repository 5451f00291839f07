"""queueguard lint: golden pairs per rule, the corpus of dangerous snippets, and the rule engine.

Golden pairs live in tests/lint/lint_corpus/golden/<rule>/: `good*.sql` lints clean,
`bad*.sql` produces exactly the lines of its `.expected` file (paths relative to the file's
folder). The corpus in tests/lint/lint_corpus/dangerous/ holds one mistake per file with its
expected codes in an `-- expect:` header. Everything here runs squawk at most a few times (no
database).
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from queueguard.errors import UsageError
from queueguard.lint import LintFailed, Report, discover, lint, predating_lint
from queueguard.lint.model import SqlFile, scan
from queueguard.lint.rules import RULES
from queueguard.lint.rules.lock_order import access_exclusive_tables
from queueguard.queue_schema import manifest
from queueguard.resources import migrations_dir

CORPUS = Path(__file__).parent / "lint_corpus"
GOLDEN = CORPUS / "golden"
DANGEROUS = CORPUS / "dangerous"
GOLDEN_BAD = sorted(GOLDEN.rglob("bad*.sql"))
GOLDEN_GOOD = sorted(GOLDEN.rglob("good*.sql"))
SNIPPETS = sorted(DANGEROUS.rglob("*.sql"))
_EXPECT = re.compile(r"^-- expect: (.+)$", re.MULTILINE)


def _id(path: Path) -> str:
    return str(path.relative_to(CORPUS))


def _codes(report: Report, path: Path) -> set[str]:
    return {f.code for f in report.findings if f.path == path.resolve()}


@pytest.fixture(scope="module")
def golden() -> Report:
    return lint([GOLDEN])


@pytest.fixture(scope="module")
def dangerous() -> Report:
    return lint([DANGEROUS])


# golden pairs -----------------------------------------------------------------------------------
def test_every_rule_has_a_golden_pair() -> None:
    def folders(paths: list[Path]) -> set[str]:
        return {p.relative_to(GOLDEN).parts[0] for p in paths}

    own = {r.check.__module__.rsplit(".", 1)[1] for r in RULES} - {"released_hash", "lock_budget"}
    # released_hash and lock_budget need a whole migrations directory (a manifest; revision
    # files declaring budgets): see the tamper tests in test_lint_cli and
    # upgrade_tests/test_lock_budgets.py.
    assert folders(GOLDEN_BAD) == folders(GOLDEN_GOOD) == own | {"squawk", "silences"}
    assert all(p.with_suffix(".expected").is_file() for p in GOLDEN_BAD)


@pytest.mark.parametrize("bad", GOLDEN_BAD, ids=_id)
def test_golden_bad_gives_exactly_the_expected_findings(golden: Report, bad: Path) -> None:
    expected = bad.with_suffix(".expected").read_text(encoding="utf-8").splitlines()
    actual = [f.render(bad.parent) for f in golden.findings if f.path == bad.resolve()]
    assert actual == expected


@pytest.mark.parametrize("good", GOLDEN_GOOD, ids=_id)
def test_golden_good_is_clean(golden: Report, good: Path) -> None:
    assert [f.render(GOLDEN) for f in golden.findings if f.path == good.resolve()] == []


def test_a_justified_marker_silences_and_the_report_keeps_its_reason(golden: Report) -> None:
    path = (GOLDEN / "silences" / "good.sql").resolve()
    silenced = [s for s in golden.silenced if s.finding.path == path]
    assert sorted(s.finding.code for s in silenced) == [
        "squawk.require-lock-timeout",
        "squawk.require-statement-timeout",
    ]
    assert {s.justification for s in silenced} == {"set by the runner"}


# the corpus of dangerous snippets ----------------------------------------------------------------
def _expected(path: Path) -> set[str]:
    match = _EXPECT.search(path.read_text(encoding="utf-8"))
    assert match, f"{path} has no `-- expect:` header"
    return {code.strip() for code in match.group(1).split(",")}


def test_the_corpus_holds_at_least_30_snippets_covering_every_rule() -> None:
    assert len(SNIPPETS) >= 30
    covered = set().union(*(_expected(p) for p in SNIPPETS))
    # the two whole-set rules are covered by test_lint_cli and upgrade_tests/test_lock_budgets
    own = {r.code for r in RULES} - {"migration.tampered", "migration.lock_budget"}
    assert own <= covered
    assert len({c for c in covered if c.startswith("squawk.")}) >= 20


@pytest.mark.parametrize("snippet", SNIPPETS, ids=_id)
def test_each_dangerous_snippet_reports_exactly_its_expected_codes(
    dangerous: Report, snippet: Path
) -> None:
    assert _codes(dangerous, snippet) == _expected(snippet)


# statements and the cleaned text ------------------------------------------------------------------
def test_scan_blanks_comments_and_literals_and_keeps_offsets() -> None:
    text = "SELECT 'a;b', E'it\\'s', \"x;y\" -- c;\n/* a /* nested */ ; */ $f$ ; $$ $f$, $1;"
    clean, spans = scan(text)
    assert len(clean) == len(text) and clean.count("\n") == 1
    assert '"x;y"' in clean  # identifiers are kept
    assert clean.replace('"x;y"', "").count(";") == 1 and clean.endswith("$1;")
    assert [text[s.content_start : s.content_end] for s in spans] == ["a;b", "it\\'s", " ; $$ "]


def test_statements_split_on_semicolons_outside_quotes_with_positions() -> None:
    text = "-- header\nSELECT ';';\n\n  DO $$ BEGIN PERFORM 1; END $$;\nLOCK tasks"
    file = SqlFile(Path("/x.sql"), "migration", text)
    assert [s.text for s in file.statements] == [
        "SELECT ';'",
        "DO $$ BEGIN PERFORM 1; END $$",
        "LOCK tasks",
    ]
    assert [s.position() for s in file.statements] == [(2, 1), (4, 3), (5, 1)]


@pytest.mark.parametrize(
    ("sql", "tables"),
    [
        ("LOCK tasks", ["tasks"]),
        (
            'LOCK TABLE ONLY public.task_queues, "Tasks" IN ACCESS EXCLUSIVE MODE',
            ["task_queues", "Tasks"],
        ),
        ("LOCK TABLE tasks IN SHARE ROW EXCLUSIVE MODE", []),
        ("ALTER TABLE IF EXISTS ONLY public.tasks ADD COLUMN x bigint", ["tasks"]),
        ("ALTER TABLE tasks RENAME TO t", ["tasks"]),
        ("ALTER TABLE tasks VALIDATE CONSTRAINT c", []),
        ("ALTER TABLE tasks ADD CONSTRAINT f FOREIGN KEY (a, b) REFERENCES t (a, b)", []),
        (
            "ALTER TABLE tasks ADD CONSTRAINT f FOREIGN KEY (a) REFERENCES t (a), ADD y int",
            ["tasks"],
        ),
        ("ALTER TABLE tasks DISABLE TRIGGER ALL", []),
        ("ALTER INDEX tasks_pkey RENAME TO k", []),
        ("DROP TABLE IF EXISTS tasks, public.task_queues CASCADE", ["tasks", "task_queues"]),
        ("TRUNCATE ONLY tasks, task_queues RESTART IDENTITY", ["tasks", "task_queues"]),
        ("VACUUM (FULL, ANALYZE) task_queues (data), tasks", ["task_queues", "tasks"]),
        ("VACUUM (FULL false) tasks", []),
        ("VACUUM tasks", []),
        ("CLUSTER tasks USING tasks_pkey", ["tasks"]),
        ("UPDATE tasks SET data = data", []),
    ],
)
def test_which_statements_take_access_exclusive(sql: str, tables: list[str]) -> None:
    (stmt,) = SqlFile(Path("/x.sql"), "migration", sql).statements
    assert [t for t, _ in access_exclusive_tables(stmt)] == tables


# revisions, frozen history and discovery ----------------------------------------------------------
def _revision_root(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "migrations"
    for name, text in files.items():
        (root / "sql" / name).parent.mkdir(parents=True, exist_ok=True)
        (root / "sql" / name).write_text(text)
    manifest.write(root)
    return root


RUNNER = (
    "-- lint-allow squawk.require-lock-timeout: the runner sets it with SET LOCAL\n"
    "-- lint-allow squawk.require-statement-timeout: the runner sets it with SET LOCAL\n"
)


def test_lock_order_spans_the_step_files_of_a_revision(tmp_path: Path) -> None:
    root = _revision_root(
        tmp_path,
        {
            "005/00_locks.sql": RUNNER + "LOCK TABLE tasks IN ACCESS EXCLUSIVE MODE;\n",
            "005/01_more.sql": RUNNER + "LOCK TABLE task_queues IN ACCESS EXCLUSIVE MODE;\n",
        },
    )
    report = lint([root])
    assert [f.render(root) for f in report.findings] == [
        "sql/005/01_more.sql:3:12: migration.lock_order ACCESS EXCLUSIVE on task_queues after "
        "tasks (00_locks.sql:3); the documented order is task_queues → tasks → runtime_protocol "
        f"(hint: {report.findings[0].hint})"
    ]
    # A step file given alone is linted with its whole revision.
    alone = lint([root / "sql" / "005" / "01_more.sql"])
    assert [f.code for f in alone.findings] == ["migration.lock_order"]


def test_frozen_revisions_are_checked_by_hash_not_style(tmp_path: Path) -> None:
    corpus = discover([migrations_dir()])
    frozen = {f.revision for f in corpus.frozen_files}
    assert frozen == predating_lint(migrations_dir()) == {"001", "002", "003"}
    assert {f.revision for f in corpus.migration_files} == {"004"}
    # The exemption matters: 003's SQL, linted as a new standalone file, has findings.
    for step in (migrations_dir() / "sql" / "003").glob("*.sql"):
        shutil.copy(step, tmp_path / step.name)
    assert not lint([tmp_path]).ok


def test_a_path_that_does_not_exist_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError) as raised:
        lint([tmp_path / "nope.sql"])
    assert raised.value.exit_code == 2


def test_files_in_a_folder_named_audit_queries_are_audit_queries(tmp_path: Path) -> None:
    (tmp_path / "audit_queries").mkdir()
    (tmp_path / "audit_queries" / "a.sql").write_text("SELECT nextval('s');\n")
    (tmp_path / "m.sql").write_text("SELECT nextval('s');\n")
    report = lint([tmp_path])
    assert [(f.path.name, f.code) for f in report.findings] == [("a.sql", "audit.not_read_only")]


def test_a_file_sqlglot_cannot_tokenize_is_reported(tmp_path: Path) -> None:
    (tmp_path / "broken.sql").write_text("SELECT 'unterminated;\n")
    codes = {f.code for f in lint([tmp_path]).findings}
    assert "lint.syntax" in codes


def test_raise_on_findings_raises_with_the_findings() -> None:
    with pytest.raises(LintFailed) as raised:
        lint([GOLDEN / "lock_order" / "bad.sql"], raise_on_findings=True)
    assert [f.code for f in raised.value.findings] == ["migration.lock_order"] * 2
    assert raised.value.exit_code == 1
