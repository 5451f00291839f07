"""`queueguard mutate` end to end: the equivalence file, the score and exit codes, the gates,
a tiny mutant set judged on a real server (killed, equivalent, survivor, timeout; the JSON
shape; nothing left behind), and the fast verify gate doing exactly what `verify` does."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from queueguard import revisions
from queueguard.cli import main
from queueguard.mutate import equivalents, gates
from queueguard.mutate.equivalents import Equivalent
from queueguard.mutate.errors import EquivalentsError
from queueguard.mutate.gates import GateResult, command_gate, fast_verify
from queueguard.mutate.generate import generate
from queueguard.mutate.model import Mutant
from queueguard.mutate.report import build
from queueguard.mutate.runner import RunResult
from queueguard.mutate.shared import prepare
from queueguard.mutate.worker import Outcome
from queueguard.mutate.workspace import materialise
from queueguard.pg.connect import connection
from queueguard.pg.scratch import ScratchDatabases
from queueguard.queue_schema import golden, verify
from queueguard.queue_schema.preflight import preflight
from queueguard.queue_schema.verify import report as verify_report
from queueguard.resources import fixtures_dir, migrations_dir

# One mutate run at a time on the shared server (pytest-xdist: one worker runs this group):
# a run checks that it left no scratch database behind, which a concurrent run's would fail.
pytestmark = pytest.mark.xdist_group("mutate")

MUTANTS = generate(revisions.packaged(), "004")


def pick(operator: str, text: str) -> Mutant:
    (found,) = [m for m in MUTANTS if m.operator == operator and text in m.description]
    return found


KILLED = pick("flip-comparison", "t.task_id = k.task_id →")
EQUIVALENT = pick("join-kind", "LEFT JOIN LATERAL")
SURVIVOR = pick("drop-statement", "ALTER TABLE directive ADD PRIMARY KEY")
SLOW = pick("off-by-one", "0 → -1 in COALESCE(d.last_task_id, 0)")


def entry(mutant: Mutant, reason: str = "an aggregate subquery always returns one row") -> str:
    return equivalents.stub(mutant).replace('reason = ""', f"reason = {json.dumps(reason)}")


# the equivalence file ----------------------------------------------------------------------
def test_equivalents_match_by_operator_file_and_id_and_report_stale(tmp_path: Path) -> None:
    path = tmp_path / "eq.toml"
    path.write_text(
        entry(EQUIVALENT)
        + """
[[equivalent]]
id = "0123456789ab"
operator = "drop-statement"
file = "sql/004/01_plan.sql"
reason = "true of a statement that changed since"

[[equivalent]]
id = "ba9876543210"
operator = "drop-statement"
file = "sql/003/00_locks.sql"
reason = "another revision's"
"""
    )
    entries = equivalents.load(path)
    assert [e.id for e in entries] == [EQUIVALENT.id, "0123456789ab", "ba9876543210"]
    matched = equivalents.match(entries, MUTANTS, "004")
    assert list(matched.equivalent) == [EQUIVALENT.id]
    assert [e.id for e in matched.stale] == ["0123456789ab"]  # 003's entry: not 004's business


ENTRY = 'id = "a"\noperator = "o"\nfile = "f"\n'


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (f"[[equivalent]]\n{ENTRY}", "needs a one-line reason"),
        (f'[[equivalent]]\n{ENTRY}reason = "  "\n', "needs a one-line reason"),
        (f'[[equivalent]]\n{ENTRY}reason = """x\ny"""\n', "must be one line"),
        ('[[equivalent]]\nid = "a"\nfile = "f"\nreason = "r"\n', "has no `operator`"),
        (f'[[equivalent]]\n{ENTRY}reason = "r"\nwhy = 1\n', "unknown key"),
        (f'[[equivalent]]\n{ENTRY}reason = "r"\n' * 2, "more than once"),
        ("equivalent = 3\n", "array of tables"),
        ("[[equivalent]\n", "cannot read"),
    ],
    ids=[
        "no-reason",
        "blank-reason",
        "two-lines",
        "no-operator",
        "unknown-key",
        "twice",
        "not-tables",
        "bad-toml",
    ],
)
def test_a_bad_equivalence_file_is_an_error(tmp_path: Path, body: str, message: str) -> None:
    path = tmp_path / "eq.toml"
    path.write_text(body)
    with pytest.raises(EquivalentsError, match=message):
        equivalents.load(path)


def test_a_bad_equivalence_file_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "eq.toml"
    path.write_text('[[equivalent]]\nid = "a"\noperator = "o"\nfile = "f"\n')
    assert main(["mutate", "--list", "--equivalents", str(path)]) == 2
    assert "needs a one-line reason" in capsys.readouterr().err


# score and exit codes (no database) --------------------------------------------------------
def _outcome(mutant: Mutant, *, killed: bool = False, timed_out: bool = False) -> Outcome:
    if timed_out:
        return Outcome(mutant.id, (), 1000, timed_out=True)
    gates = (GateResult("lint", True, "clean", "", 1), GateResult("verify", not killed, "x", "", 1))
    return Outcome(mutant.id, gates, 2)


def test_score_and_exit_codes() -> None:
    chosen = [KILLED, EQUIVALENT, SURVIVOR, SLOW]
    outcomes = (
        _outcome(KILLED, killed=True),
        _outcome(EQUIVALENT),
        _outcome(SURVIVOR),
        _outcome(SLOW, timed_out=True),
    )
    run = RunResult(outcomes, (), 4000, 5000, 2)
    listed = Equivalent(EQUIVALENT.id, EQUIVALENT.operator, EQUIVALENT.file, "one row")
    matched = equivalents.match([listed], chosen, "004")
    report = build("004", chosen, run, matched, ("lint", "verify"), "eq.toml")
    assert [r.status for r in report.results] == ["killed", "equivalent", "survived", "timeout"]
    assert report.counts == {
        "mutants": 4,
        "killed": 1,
        "timeout": 1,
        "survived": 1,
        "equivalent": 1,
    }
    assert report.score == pytest.approx(2 / 3)
    assert report.exit_code == 1
    assert report.mutants_per_second == pytest.approx(1.0)
    text = report.render()
    assert f"SURVIVED {SURVIVOR.id} drop-statement sql/004/01_plan.sql:10" in text
    assert "-ALTER TABLE directive ADD PRIMARY KEY (run_id)" in text
    assert f'id = "{SURVIVOR.id}"' in text  # the stub to paste once a reason is written
    # listing the survivor as equivalent leaves only killed mutants and equivalents: exit 0
    also = Equivalent(SURVIVOR.id, SURVIVOR.operator, SURVIVOR.file, "the key only speeds joins")
    ok = build(
        "004",
        chosen,
        run,
        equivalents.match([listed, also], chosen, "004"),
        ("lint", "verify"),
        "eq.toml",
    )
    assert (ok.exit_code, ok.score, ok.counts["equivalent"]) == (0, 1.0, 2)
    # an entry a gate kills is contradicted, not counted as equivalent
    wrong = Equivalent(KILLED.id, KILLED.operator, KILLED.file, "wrong")
    bad = build("004", chosen, run, equivalents.match([wrong], chosen, "004"), ("lint",), "e")
    assert [r.mutant.id for r in bad.contradicted] == [KILLED.id]
    # …and carries its evidence in the JSON (the gates' output), the others only their reason
    shown = {m["id"]: m for m in bad.as_json()["mutants"]}
    assert [g["gate"] for g in shown[KILLED.id]["gates"]] == ["lint", "verify"]
    assert "gates" not in shown[SURVIVOR.id]


def test_the_verify_verdict_names_each_failed_check_with_its_evidence() -> None:
    """A killed mutant's report keeps only the gate's summary: it must say what failed."""
    checks = [
        verify_report.Check("golden", True),
        verify_report.Check("contention", False, "revision 004 …: did not give up\nsecond line"),
        verify_report.Check("online", False, ""),
    ]
    report = verify_report.VerifyReport([verify_report.FixtureResult("v0.3", "003", checks)], 1)
    assert gates._verdict(report) == (
        "failed: v0.3 contention (revision 004 …: did not give up); v0.3 online"
    )


@pytest.mark.slow
def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["mutate", "009", "--list"]) == 2
    assert "unknown revision '009'" in capsys.readouterr().err
    assert main(["mutate", "--list", "--migrations", str(tmp_path)]) == 2
    assert "not a migration set" in capsys.readouterr().err
    assert main(["mutate", "--list", "--operator", "nope"]) == 2
    assert "unknown operator nope" in capsys.readouterr().err
    assert main(["mutate", "--list", "--mutant", "000000000000"]) == 2
    assert "no mutant 000000000000" in capsys.readouterr().err
    assert main(["mutate", "--jobs", "0", "--dsn", "postgresql:///nowhere"]) == 2
    assert "--jobs" in capsys.readouterr().err
    assert main(["mutate", "--timeout", "soon"]) == 2


def test_the_command_gate_sees_the_copy_and_fails_on_a_non_zero_exit(tmp_path: Path) -> None:
    ok = command_gate('test "$QUEUEGUARD_MIGRATIONS" = "$PWD/here" || exit 1; echo fine', tmp_path)
    assert not ok.ok  # a different folder: exit 1
    seen = command_gate('echo "$QUEUEGUARD_MIGRATIONS"; exit 3', tmp_path / "copy")
    assert (seen.ok, seen.summary) == (False, f"exit 3: {tmp_path / 'copy'}")


def test_the_copy_is_every_default_inside_the_command(tmp_path: Path) -> None:
    """queueguard reads QUEUEGUARD_MIGRATIONS wherever no migration set is given: a test suite
    run by --command on its defaults runs against the mutant."""
    copy = tmp_path / "copy"
    shutil.copytree(migrations_dir(), copy, ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "versions" / "004.py").write_text(
        (copy / "versions" / "004.py").read_text().replace("v0.4 (head)", "the copy's 004")
    )
    probe = (
        f"{sys.executable} -c 'from queueguard import revisions; "
        "print(revisions.packaged().head.title)'"
    )
    seen = command_gate(probe + ' | grep -q "the copy" || exit 7', copy)
    assert seen.ok, seen.output


# on a real server --------------------------------------------------------------------------
def _databases(admin: str, prefix: str) -> list[str]:
    with connection(admin) as conn:
        rows = conn.execute(
            "SELECT datname FROM pg_database WHERE left(datname, length(%s)) = %s",
            (prefix, prefix),
        ).fetchall()
    return [r[0] for r in rows]


def _snapshot(root: Path) -> dict[str, bytes]:
    files = (p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    return {str(p.relative_to(root)): p.read_bytes() for p in files}


@pytest.mark.slow
def test_a_tiny_mutant_set_end_to_end(
    queueguard_server: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    eq = tmp_path / "equivalents.toml"
    eq.write_text(entry(EQUIVALENT))
    # the command checks it got a migration set, and never ends for SLOW: a timeout
    command = (
        'test -f "$QUEUEGUARD_MIGRATIONS/manifest.json" && '
        f'case "$QUEUEGUARD_MIGRATIONS" in *{SLOW.id}) sleep 600;; esac'
    )
    # The gates on the v0.3 fixture alone (004's closest): what this test judges is the run's
    # machinery, and a surviving mutant must finish every gate well inside the timeout even
    # on a loaded machine, while the slow one must reach it.
    fixtures = tmp_path / "fixtures"
    shutil.copytree(fixtures_dir(), fixtures, ignore=shutil.ignore_patterns("v0.1", "v0.2"))
    argv = ["mutate", "004", "--json", "--jobs", "2", "--timeout", "45s", "--equivalents", str(eq)]
    argv += ["--dsn", queueguard_server, "--command", command, "--fixtures", str(fixtures)]
    for m in (KILLED, EQUIVALENT, SURVIVOR, SLOW):
        argv += ["--mutant", m.id]
    before = _snapshot(migrations_dir())
    # Each run names its scratch databases qgm<token>…; runs already going on this server
    # (another mutate elsewhere) are told apart by their tokens.
    others = {name[:9] for name in _databases(queueguard_server, "qgm")}
    code = main(argv)
    captured = capsys.readouterr()
    doc = json.loads(captured.out)
    # every mutant's status, killedBy and reason (a killing gate's verdict, each failed check
    # with its first line of evidence; a contradicted equivalent also carries the gates'
    # output): a failure here names the check that decided
    why = json.dumps(doc["mutants"], indent=1)
    assert code == 1, captured.err + why
    assert doc["schemaVersion"] == 1 and doc["revision"] == "004" and doc["ok"] is False
    assert doc["counts"] == {
        "mutants": 4,
        "killed": 1,
        "timeout": 1,
        "survived": 1,
        "equivalent": 1,
        "nonEquivalent": 3,
    }, why
    assert doc["score"] == pytest.approx(2 / 3, abs=1e-4)
    assert doc["gates"] == ["lint", "verify", "command"] and doc["jobs"] == 2
    assert doc["mutantsPerSecond"] > 0
    status = {m["id"]: (m["status"], m["killedBy"]) for m in doc["mutants"]}
    assert status == {
        KILLED.id: ("killed", "verify"),
        EQUIVALENT.id: ("equivalent", None),
        SURVIVOR.id: ("survived", None),
        SLOW.id: ("timeout", None),
    }, why
    (survivor,) = doc["survivors"]
    assert survivor["id"] == SURVIVOR.id
    assert "-ALTER TABLE directive ADD PRIMARY KEY (run_id)" in survivor["diff"]
    assert [(g["gate"], g["ok"]) for g in survivor["gates"]] == [
        ("lint", True),
        ("verify", True),
        ("command", True),
    ]
    assert [t["id"] for t in doc["timeouts"]] == [SLOW.id]
    assert doc["equivalents"]["matched"][0]["id"] == EQUIVALENT.id
    assert doc["equivalents"]["stale"] == []
    assert set(doc["baselines"]) == {"baseline", "rendered"}
    assert all(b["ok"] for b in doc["baselines"].values())
    assert "killed by verify" in captured.err and "timeout" in captured.err
    left = [n for n in _databases(queueguard_server, "qgm") if n[:9] not in others]
    assert left == []  # every scratch database of this run dropped
    assert _snapshot(migrations_dir()) == before  # the real migration set is never touched


@pytest.mark.slow
def test_the_fast_verify_gate_runs_what_verify_runs(queueguard_server: str, tmp_path: Path) -> None:
    """Same fixtures, same checks (preflight aside: run once per run), the same compatibility
    matrix: the shared template and views change nothing but the time."""
    root = materialise(migrations_dir(), tmp_path / "migrations", {})
    migrations = revisions.load(root)
    exact = verify.verify(queueguard_server, preflight=None, migrations=migrations)
    # qg… (only so named a scratch database is dropped), not qgm…: the end-to-end test
    # above, maybe running beside this one, counts every qgm… database it did not see
    # before it started as one its run left behind
    with ScratchDatabases(queueguard_server, prefix="qgfvtest") as templates:
        shared = prepare(templates, migrations, "004")
        fast = fast_verify(shared, migrations, None, "qgfvtestf")

    def checks(report: verify_report.VerifyReport) -> dict[str, list[str]]:
        return {r.fixture: [c.name for c in r.checks] for r in report.results}

    assert exact.ok and fast.ok, verify_report.render(fast)
    assert checks(fast) == checks(exact)
    assert fast.compatibility is not None and exact.compatibility is not None
    assert fast.compatibility.as_json() == exact.compatibility.as_json()
    assert set(fast.as_json()) == set(exact.as_json())
    assert _databases(queueguard_server, "qgfvtest") == []


def test_preflight_reads_no_migration_sql(queueguard_database: object, tmp_path: Path) -> None:
    """Why the gate checks preflight once, not per mutant: its findings do not depend on the
    revisions' SQL."""
    assert callable(queueguard_database)
    dsn = queueguard_database(fixture="v0.3")
    emptied = materialise(
        migrations_dir(),
        tmp_path / "m",
        {f"sql/004/{p.name}": "SELECT 1;\n" for p in (migrations_dir() / "sql/004").glob("*.sql")},
    )

    def findings(root: Path | None) -> list[tuple[str, int]]:
        report = preflight(dsn, migrations=revisions.load(root) if root else None)
        return sorted((f.code, f.count) for f in report.findings)

    assert findings(emptied) == findings(None)
    assert golden.get("v0.3").revision == "003"
