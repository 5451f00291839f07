"""`queueguard fleet upgrade` on the test server: discovery, schema targets in their own
schema, waves in order, stop and isolate, a target that cannot be reached, a database
created after the run froze its manifest, the fence, and passwords kept out of everything
the run writes."""

from __future__ import annotations

import json
import time

import psycopg
import pytest

from queueguard.fleet import control
from queueguard.fleet.control import Control, StaleFence
from queueguard.fleet.resolved import resolve
from queueguard.fleet.upgrade import join
from queueguard.pg.dsn import with_params
from tests.fleet.conftest import SET, Fleet, ledger

HEAD = ["0001", "0002", "0003"]


def test_databases_and_schemas_are_discovered_and_upgraded_each_in_its_own_place(
    fleet: Fleet, capsys: pytest.CaptureFixture[str]
) -> None:
    for i in range(3):
        fleet.database(f"db{i}")
    shared = fleet.schemas("shared", ["tenant_a", "tenant_b", "Tenant C"])
    path = fleet.targets_file(
        fleet.discover_databases('labels = { kind = "db" }\n', like="db%")
        + f"[[discover]]\ndsn = \"{shared}\"\nschemas = 'tenant\\_%'\n"
        + f'[[targets]]\nname = "odd"\ndsn = "{shared}"\nschema = "Tenant C"\n'
        + '[[waves]]\nname = "databases"\nmatch = { kind = "db" }\nparallel = 2\n'
        + '[[waves]]\nname = "schemas"\nparallel = 3\n'
    )
    events = fleet.root / "events.jsonl"
    code, out, err = fleet.cli(capsys, "upgrade", "--targets", str(path), "--events", str(events))
    assert code == 0, err
    names = {f"{fleet.prefix}_db{i}" for i in range(3)} | {
        f"{fleet.prefix}_shared/tenant_a", f"{fleet.prefix}_shared/tenant_b", "odd"
    }  # fmt: skip
    assert fleet.board() == {n: ("done", "0003", 1, None) for n in names}
    for i in range(3):
        assert ledger(fleet.dsn(f"db{i}")) == HEAD
    # each schema holds its own objects and ledger; public holds nothing of the set's
    for schema in ("tenant_a", "tenant_b", "Tenant C"):
        assert ledger(shared, schema) == HEAD
        tables = fleet.sql(shared, f"SELECT to_regclass('\"{schema}\".items') IS NOT NULL")
        assert tables == [(True,)]
    assert fleet.sql(shared, "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'") == [(0,)]
    # waves in order: no schema target ran before every database target was done
    lines = [json.loads(line) for line in events.read_text().splitlines()]
    assert all(line["schemaVersion"] == 1 for line in lines)
    waves = [line["wave"] for line in lines if line["state"] == "running"]
    assert waves == sorted(waves, key=["databases", "schemas"].index), waves

    # a second run finds every target at head: recorded done, nothing claimed
    code, _, err = fleet.cli(capsys, "upgrade", "--targets", str(path), "--events", str(events))
    assert code == 0, err
    again = [json.loads(line) for line in events.read_text().splitlines()][len(lines) :]
    assert again and {e["state"] for e in again} == {"done"}
    code, out, _ = fleet.cli(capsys, "status", "--targets", str(path), "--json")
    assert code == 0 and json.loads(out)["done"] is True


def test_a_failing_canary_stops_the_run_and_leaves_every_other_target_untouched(
    fleet: Fleet, capsys: pytest.CaptureFixture[str]
) -> None:
    canary = fleet.database("a_canary")
    fleet.sql(canary, "CREATE TABLE items (id int)")  # 0001 fails here
    for i in range(3):
        fleet.database(f"b{i}")
    listed = "".join(
        f'[[targets]]\nname = "b{i}"\ndsn = "{fleet.dsn(f"b{i}")}"\n' for i in range(3)
    )
    path = fleet.targets_file(
        f'[[targets]]\nname = "canary"\ndsn = "{canary}"\nlabels = {{ tier = "canary" }}\n'
        + listed
        + '[[waves]]\nname = "canary"\nmatch = { tier = "canary" }\non_error = "stop"\n'
        + '[[waves]]\nname = "rest"\n'
    )
    code, _, err = fleet.cli(capsys, "upgrade", "--targets", str(path))
    assert code == 1
    assert "fleet: failed: canary: revision 0001 looks half applied" in err
    board = fleet.board()
    assert board["canary"][0] == "failed"
    for i in range(3):
        assert board[f"b{i}"][0] == "skipped" and "canary failed" in board[f"b{i}"][3]
        assert ledger(fleet.dsn(f"b{i}")) == []
        assert fleet.sql(fleet.dsn(f"b{i}"), "SELECT count(*) FROM pg_tables "
                         "WHERE schemaname = 'public'") == [(0,)]  # fmt: skip


def test_isolate_records_three_failures_and_brings_every_other_target_to_head(
    fleet: Fleet, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = {"d1", "d3", "d5"}
    for i in range(6):
        dsn = fleet.database(f"d{i}")
        if f"d{i}" in broken:
            fleet.sql(dsn, "CREATE TABLE items (id int, owner_id int)")  # 0001 fails
    path = fleet.targets_file(
        fleet.discover_databases() + '[[waves]]\nname = "all"\non_error = "isolate"\nparallel = 3\n'
    )
    code, _, err = fleet.cli(capsys, "upgrade", "--targets", str(path))
    assert code == 1
    failed = {
        line.split(": ")[2] for line in err.splitlines() if line.startswith("fleet: failed: ")
    }
    assert failed == {f"{fleet.prefix}_{b}" for b in broken}
    for i in range(6):
        name = f"d{i}"
        assert ledger(fleet.dsn(name)) == ([] if name in broken else HEAD), name


def test_an_unreachable_target_is_recorded_failed_and_the_others_go_on(
    fleet: Fleet, capsys: pytest.CaptureFixture[str]
) -> None:
    fleet.database("ok1")
    fleet.database("ok2")
    gone = fleet.dsn("never_created")
    path = fleet.targets_file(
        fleet.discover_databases()
        + f'[[targets]]\nname = "gone"\ndsn = "{gone}"\n'
        + '[[waves]]\nname = "all"\non_error = "isolate"\n'
    )
    code, _, err = fleet.cli(capsys, "upgrade", "--targets", str(path))
    assert code == 1
    board = fleet.board()
    assert board["gone"][0] == "failed" and "does not exist" in board["gone"][3]
    assert ledger(fleet.dsn("ok1")) == HEAD and ledger(fleet.dsn("ok2")) == HEAD
    assert "fleet: failed: gone: " in err


def test_a_database_created_after_the_run_froze_its_manifest_is_reported_not_touched(
    fleet: Fleet, capsys: pytest.CaptureFixture[str]
) -> None:
    fleet.database("first")
    path = fleet.targets_file(fleet.discover_databases())
    # the run starts (its manifest frozen) before the new tenant exists
    resolved = resolve(path, None, None)
    ctl = control.open_control(fleet.control)
    try:
        _, new = join(ctl, resolved, None, None)
    finally:
        ctl.close()
    assert new
    late = fleet.database("late")
    code, _, err = fleet.cli(capsys, "upgrade", "--targets", str(path))
    assert code == 0, err
    assert f"{fleet.prefix}_late: not in this run" in err
    assert fleet.board()[f"{fleet.prefix}_late"][0] == "not in this run"
    assert ledger(late) == [] and ledger(fleet.dsn("first")) == HEAD


def test_a_stale_fence_cannot_record_nor_renew(fleet: Fleet) -> None:
    fleet.database("only")
    path = fleet.targets_file(fleet.discover_databases())
    resolved = resolve(path, None, None)
    a, b = control.open_control(fleet.control), Control(fleet.control)
    try:
        run, _ = join(a, resolved, None, None)
        first = a.claim(run, "runner-a", 0.3, {})
        assert first is not None and first.fence == 1 and not first.takeover
        assert b.claim(run, "runner-b", 30, {}) is None  # the wave's one target is held
        time.sleep(0.5)  # runner-a stalls past its lease
        second = b.claim(run, "runner-b", 30, {})
        assert second is not None and second.fence == 2 and second.takeover
        with pytest.raises(StaleFence):
            a.record(run, first, "done", revision="0003")
        assert a.renew(run, first, 30) is False
        assert fleet.board()[first.name][:3] == ("running", None, 2)
        b.record(run, second, "done", revision="0003")
        assert fleet.board()[first.name][:3] == ("done", "0003", 2)
    finally:
        a.close()
        b.close()


def test_passwords_are_never_printed_stored_or_written(
    fleet: Fleet, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The test server trusts local connections: a password is sent and ignored, and must
    show nowhere: stdout, stderr, the control database, the events, the metrics."""
    dsn = fleet.database("pw")
    secret = "hunter2-fleet-secret"
    monkeypatch.setenv("QG_FLEET_PW", secret)
    path = fleet.targets_file(
        f'[[targets]]\nname = "pw"\ndsn = "{dsn} password=${{QG_FLEET_PW}}"\n'
        f'[[targets]]\nname = "gone"\ndsn = "{fleet.dsn("absent")} password={secret}"\n'
        '[[waves]]\nname = "all"\non_error = "isolate"\n'
    )
    events, metrics = fleet.root / "events.jsonl", fleet.root / "metrics.prom"
    code, out, err = fleet.cli(
        capsys, "upgrade", "--targets", str(path), "--events", str(events),
        "--metrics", str(metrics), "--json",
    )  # fmt: skip
    assert code == 1  # "gone" cannot be reached
    assert ledger(dsn) == HEAD
    stored = fleet.sql(fleet.control, "SELECT t::text FROM queueguard_fleet.targets t")
    written = [out, err, events.read_text(), metrics.read_text(), *(r[0] for r in stored)]
    assert all(secret not in text for text in written)
    assert "queueguard_fleet_targets" in metrics.read_text()


def test_matrix_for_each_engine(capsys: pytest.CaptureFixture[str]) -> None:
    from queueguard.cli import main

    assert main(["fleet", "matrix", "--shards", "3"]) == 0
    assert json.loads(capsys.readouterr().out) == {"include": [{"shard": i} for i in range(3)]}
    assert main(["fleet", "matrix", "--shards", "2", "--for", "argo"]) == 0
    assert json.loads(capsys.readouterr().out) == [{"shard": 0}, {"shard": 1}]
    assert main(["fleet", "matrix", "--shards", "4", "--for", "kubernetes"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert (doc["completions"], doc["parallelism"]) == (4, 4)
    assert main(["fleet", "matrix", "--shards", "300"]) == 2


def test_a_bad_file_is_refused_before_anything_is_written(
    fleet: Fleet, capsys: pytest.CaptureFixture[str]
) -> None:
    fleet.database("x")
    path = fleet.targets_file(
        fleet.discover_databases()
        + '[[waves]]\nname = "canary"\nmatch = { tier = "canary" }\n[[waves]]\nname = "rest"\n'
    )
    code, _, err = fleet.cli(capsys, "upgrade", "--targets", str(path))
    assert code == 2
    assert "waves[0].match: wave 'canary' selects no target" in err
    runs = fleet.sql(fleet.control, "SELECT to_regclass('queueguard_fleet.runs')")
    assert runs == [(None,)]
    assert ledger(fleet.dsn("x")) == []


def test_the_live_board_draws_waves_running_targets_and_recent_changes() -> None:
    from rich.console import Console

    from queueguard.fleet import board, live

    rows = [
        ("a", 0, "canary", "done", "0003", None, 1, 1200, None, 1, "dsn", None, None, False, 0),
        ("b", 1, "rest", "running", None, None, 1, None, 500, 1, "dsn", None, 900, False, 0),
        ("c", 1, "rest", "pending", None, None, 0, None, None, 0, "dsn", None, None, False, 0),
    ]
    doc = board.document(7, rows)
    console = Console(record=True, width=120)
    console.print(live.render(doc, ["fleet: a: done at 0003"]))
    text = console.export_text()
    assert "fleet run 7" in text and "canary" in text and "rest" in text
    assert "b" in text and "late" in text  # running 0.9 s, predicted 0.5 s
    assert "fleet: a: done at 0003" in text


def test_run_new_starts_another_run_and_a_changed_set_refuses_to_join_a_run_by_id(
    fleet: Fleet, capsys: pytest.CaptureFixture[str]
) -> None:
    fleet.database("one")
    path = fleet.targets_file(fleet.discover_databases())
    resolved = resolve(path, None, None)
    ctl = control.open_control(fleet.control)
    try:
        first, _ = join(ctl, resolved, None, None)  # an open run nobody works
    finally:
        ctl.close()
    code, _, err = fleet.cli(capsys, "upgrade", "--targets", str(path), "--run", "new")
    assert code == 0, err
    query = "SELECT id, finished_at IS NULL FROM queueguard_fleet.runs ORDER BY id"
    assert fleet.sql(fleet.control, query) == [(first, True), (first + 1, False)]
    # the set changes: its runs are others; joining the old one by its id is refused
    fleet.write_set({**SET, "0004_more.sql": "ALTER TABLE items ADD COLUMN more int;\n"})
    code, _, err = fleet.cli(capsys, "upgrade", "--targets", str(path), "--run", str(first))
    assert code == 2 and f"run {first} applies" in err and "does not join" in err
    code, _, err = fleet.cli(capsys, "upgrade", "--targets", str(path))
    assert code == 0, err
    assert ledger(fleet.dsn("one")) == [*HEAD, "0004"]


def test_a_runner_joining_a_live_run_runs_no_ddl_on_the_control_database(fleet: Fleet) -> None:
    """Once the control schema exists, opening the control database locks nothing: a runner
    starting while others claim must not queue their claims behind an ALTER's (or any IF
    NOT EXISTS statement's) lock — three runners deadlocked on exactly that."""
    control.open_control(fleet.control).close()
    with psycopg.connect(fleet.control) as holder:
        # another runner mid-claim: its transaction holds a lock on the control tables
        holder.execute("SELECT 1 FROM queueguard_fleet.runs FOR UPDATE")
        holder.execute("LOCK TABLE queueguard_fleet.targets IN ROW EXCLUSIVE MODE")
        # a lock it waited for would fail it after 1 s (ConnectionFailed, exit 2)
        control.open_control(with_params(fleet.control, options="-c lock_timeout=1s")).close()
        holder.rollback()


def test_a_control_database_an_earlier_version_made_gets_its_new_columns(fleet: Fleet) -> None:
    """The no-DDL path is taken only when the schema is as this version makes it: a control
    database without a column added later is brought up to date (once, under the lock)."""
    control.open_control(fleet.control).close()
    fleet.sql(fleet.control, "ALTER TABLE queueguard_fleet.targets DROP COLUMN refusal")
    control.open_control(fleet.control).close()
    found = fleet.sql(fleet.control, "SELECT count(*) FROM pg_attribute WHERE attrelid = "
                      "'queueguard_fleet.targets'::regclass AND attname = 'refusal' "
                      "AND NOT attisdropped")  # fmt: skip
    assert found == [(1,)]
