"""Several runner processes on one control database: three at once upgrade every target
exactly once; a runner SIGKILLed mid-revision has its lease taken over and the target ends
at head with the ledger a plain upgrade writes; SIGTERM leaves no target running and a
rerun goes on from where it stopped."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from queueguard.cli import main
from tests.fleet.conftest import SET, Fleet, ledger

pytestmark = pytest.mark.slow

HEAD = ["0001", "0002", "0003"]
DATA = Path(__file__).parents[1] / "sets" / "data"
#: the set with a revision that sleeps as long as the session's qg.sleep says (a runner
#: started with PGOPTIONS="-c qg.sleep=N" is caught inside it; a rerun without sleeps)
SLOW = {
    **SET,
    "0002_owner.sql": "SELECT pg_sleep(coalesce(nullif(current_setting('qg.sleep', true), ''), "
    "'0')::float8);\n" + SET["0002_owner.sql"],
}


def sleeping(seconds: float) -> dict[str, str]:
    return {"PGOPTIONS": f"-c qg.sleep={seconds}"}


def _events(path: Path) -> list[dict[str, object]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


def _wait_for(check: object, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():  # type: ignore[operator]
            return
        time.sleep(0.1)
    raise AssertionError("timed out")


def _finish(runner: subprocess.Popen[str], timeout: float = 120) -> tuple[int, str]:
    out, err = runner.communicate(timeout=timeout)
    return runner.returncode, out + err


def test_three_runners_at_once_upgrade_every_target_exactly_once(fleet: Fleet) -> None:
    fleet.write_set(SLOW)
    for i in range(9):
        fleet.database(f"t{i}")
    path = fleet.targets_file(
        fleet.discover_databases() + '[[waves]]\nname = "all"\nparallel = 6\n'
    )
    files = [fleet.root / f"events{i}.jsonl" for i in range(3)]
    runners = [
        fleet.runner("--targets", str(path), "--events", str(f), env=sleeping(0.3)) for f in files
    ]
    ends = [_finish(r) for r in runners]
    assert [code for code, _ in ends] == [0, 0, 0], [err for _, err in ends]
    claims = [e for f in files for e in _events(f) if e["state"] == "running"]
    names = [e["target"] for e in claims]
    assert sorted(names) == sorted(f"{fleet.prefix}_t{i}" for i in range(9))  # once each
    assert {e["run"] for e in claims} == {claims[0]["run"]}  # one run
    # every runner joined that run and ended with its exit code (the board it printed)
    assert all(f"fleet run {claims[0]['run']}\n" in text for _, text in ends)
    assert {v[2] for v in fleet.board().values()} == {1}  # no claim taken twice
    for i in range(9):
        assert ledger(fleet.dsn(f"t{i}")) == HEAD


def test_a_runner_killed_mid_revision_is_taken_over_and_the_target_ends_as_a_plain_upgrade(
    fleet: Fleet, capsys: pytest.CaptureFixture[str]
) -> None:
    fleet.write_set(SLOW)
    target = fleet.database("t")
    plain = fleet.database("plain")
    path = fleet.targets_file(f'[[targets]]\nname = "t"\ndsn = "{target}"\n')
    first = fleet.root / "first.jsonl"
    a = fleet.runner(
        "--targets", str(path), "--claim-ttl", "2s", "--events", str(first), env=sleeping(3)
    )  # fmt: skip
    _wait_for(lambda: any(e["state"] == "running" for e in _events(first)))
    _wait_for(lambda: ledger(target) == ["0001"])  # inside 0002's transaction now
    a.send_signal(signal.SIGKILL)
    a.wait(10)
    second = fleet.root / "second.jsonl"
    code, _, err = fleet.cli(
        capsys, "upgrade", "--targets", str(path), "--claim-ttl", "2s", "--events", str(second)
    )
    assert code == 0, err
    took = [e for e in _events(second) if e["state"] == "running"]
    assert took and took[0]["fence"] == 2  # the killed runner's claim was fence 1
    assert fleet.board()["t"][:3] == ("done", "0003", 2)
    assert main(["upgrade", "--migrations", str(fleet.set_dir), "--dsn", plain]) == 0
    capsys.readouterr()
    rows = "SELECT revision, checksum FROM queueguard_sqldir_ledger ORDER BY revision"
    assert fleet.sql(target, rows) == fleet.sql(plain, rows)


def test_sigterm_leaves_no_target_running_and_a_rerun_goes_on(
    fleet: Fleet, capsys: pytest.CaptureFixture[str]
) -> None:
    fleet.write_set(SLOW)
    target = fleet.database("t")
    fleet.database("u")
    path = fleet.targets_file(
        fleet.discover_databases() + '[[waves]]\nname = "all"\nparallel = 1\n'
    )
    events = fleet.root / "events.jsonl"
    a = fleet.runner(
        "--targets", str(path), "--stop-grace", "1s", "--events", str(events), env=sleeping(30)
    )  # fmt: skip
    _wait_for(lambda: ledger(target) == ["0001"] or ledger(fleet.dsn("u")) == ["0001"])
    time.sleep(0.5)
    began = time.monotonic()
    a.send_signal(signal.SIGTERM)
    code, err = _finish(a, 60)
    assert code == 1, err
    assert time.monotonic() - began < 20  # the 30 s statement was cancelled after the grace
    assert "SIGTERM" in err
    board = fleet.board()
    assert "running" not in {v[0] for v in board.values()}, board
    interrupted = [n for n, v in board.items() if v[3] and "SIGTERM" in v[3]]
    assert len(interrupted) == 1 and board[interrupted[0]][0] == "pending"
    # the revision in flight rolled back whole; a rerun joins the run and finishes it
    assert ledger(fleet.dsn(interrupted[0].removeprefix(f"{fleet.prefix}_"))) == ["0001"]
    code, _, err = fleet.cli(capsys, "upgrade", "--targets", str(path))
    assert code == 0, err
    assert {v[0] for v in fleet.board().values()} == {"done"}
    assert ledger(target) == HEAD and ledger(fleet.dsn("u")) == HEAD


def test_a_stop_lets_the_target_in_flight_end_its_revision_and_the_run_ends(
    fleet: Fleet, capsys: pytest.CaptureFixture[str]
) -> None:
    """One wave of two at once, on_error = stop: one target fails in 0003 while the other
    is inside a slow 0002. The run stops: the other ends 0002 and stops there (skipped, at
    it), the runner exits 1 and the run is finished; a rerun starts a new run and goes on
    from that revision. (Each database's sleep and failure are its own settings.)"""
    fleet.write_set({
        **SLOW,
        "0003_flag.sql": "SELECT 1 / (CASE WHEN current_setting('qg.fail', true) = 'yes' "
        "THEN 0 ELSE 1 END);\n" + SET["0003_flag.sql"],
    })  # fmt: skip
    broken = fleet.database("a_broken")
    slow = fleet.database("b_slow")
    fleet.sql(broken, f'ALTER DATABASE "{fleet.prefix}_a_broken" SET qg.sleep = 1')
    fleet.sql(broken, f'ALTER DATABASE "{fleet.prefix}_a_broken" SET qg.fail = yes')
    fleet.sql(slow, f'ALTER DATABASE "{fleet.prefix}_b_slow" SET qg.sleep = 4')
    path = fleet.targets_file(
        f'[[targets]]\nname = "broken"\ndsn = "{broken}"\n'
        f'[[targets]]\nname = "slow"\ndsn = "{slow}"\n'
        '[[waves]]\nname = "all"\nparallel = 2\non_error = "stop"\n'
    )
    code, _, err = fleet.cli(capsys, "upgrade", "--targets", str(path))
    assert code == 1, err
    board = fleet.board()
    assert board["broken"][0] == "failed" and "division by zero" in board["broken"][3]
    assert board["slow"][:2] == ("skipped", "0002"), board["slow"]  # its revision ended
    assert ledger(slow) == ["0001", "0002"]
    finished = fleet.sql(fleet.control, "SELECT finished_at IS NOT NULL FROM queueguard_fleet.runs")
    assert finished == [(True,)]
    fleet.sql(broken, f'ALTER DATABASE "{fleet.prefix}_a_broken" RESET qg.fail')
    code, _, err = fleet.cli(capsys, "upgrade", "--targets", str(path))
    assert code == 0, err
    assert ledger(slow) == HEAD and ledger(broken) == HEAD
    assert fleet.sql(fleet.control, "SELECT count(*) FROM queueguard_fleet.runs") == [(2,)]


def test_sigterm_cancels_an_alembic_target_in_its_worker_process(
    fleet: Fleet, tmp_path: Path
) -> None:
    """An Alembic set runs in worker processes: SIGTERM's grace over, the worker's statement
    is cancelled (the revision rolls back), the target is put back to pending, the runner
    exits 1 and leaves no session of its own on the target."""
    project = tmp_path / "alembic"
    shutil.copytree(DATA / "alembic_plain", project, ignore=shutil.ignore_patterns("__pycache__"))
    (project / "migrations" / "versions" / "4d3f81a25e04_slow.py").write_text(
        '"""slow"""\n\nfrom alembic import op\n\nrevision = "4d3f81a25e04"\n'
        'down_revision = "3c2e70914d03"\nbranch_labels = None\ndepends_on = None\n\n\n'
        'def upgrade() -> None:\n    op.execute("CREATE TABLE slow_marker (id int)")\n'
        '    op.execute("SELECT pg_sleep(60)")\n'
    )
    target = fleet.database("t")
    path = fleet.targets_file(f'[[targets]]\nname = "t"\ndsn = "{target}"\n')
    a = fleet.runner("--targets", str(path), "--migrations", str(project), "--stop-grace", "1s")
    sleeping = "SELECT count(*) FROM pg_stat_activity WHERE query LIKE '%pg_sleep(60)%' " \
        "AND pid <> pg_backend_pid() AND datname = current_database()"  # fmt: skip
    _wait_for(lambda: fleet.sql(target, sleeping) == [(1,)], timeout=60)
    began = time.monotonic()
    a.send_signal(signal.SIGTERM)
    code, err = _finish(a, 60)
    assert code == 1, err
    assert time.monotonic() - began < 20, err  # not the 60 s statement
    state, _, _, error = fleet.board()["t"]
    assert state == "pending" and "SIGTERM" in error, (state, error)
    assert fleet.sql(target, "SELECT version_num FROM alembic_version") == [("3c2e70914d03",)]
    assert fleet.sql(target, "SELECT to_regclass('slow_marker')") == [(None,)]  # rolled back
    _wait_for(lambda: fleet.sql(target, sleeping) == [(0,)], timeout=10)
