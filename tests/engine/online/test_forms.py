"""`upgrade --migrations DIR --online` with the forms of single statements (concurrent
index, NOT VALID + VALIDATE, SET NOT NULL through a check, PRIMARY KEY / UNIQUE through a
concurrent unique index), on the embedded server: the end state equals the plain upgrade's
(a line-identical schema dump, equal rows, the set's bookkeeping), the blocking locks stay
brief, and a kill in a form's middle resumes or aborts to the state before the statement."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest

from bench.engine.online import LockSampler
from queueguard import sets
from queueguard.cli import main
from queueguard.engine.apply import in_flight as runner
from queueguard.engine.apply import progress
from queueguard.engine.apply.runner import upgrade
from queueguard.engine.apply.session import Limits
from queueguard.engine.online import abort, choose, index, proof
from queueguard.engine.online.apply import encode
from queueguard.engine.online.context import Context
from queueguard.engine.online.decide import decide
from queueguard.engine.online.upgrade import upgrade_online
from queueguard.engine.plan.bill import Line, Size
from queueguard.engine.plan.observe import Observation
from queueguard.errors import LockTimeout
from queueguard.sets import Revision

SET = {
    "V1__tables.sql": """
CREATE TABLE parent (id bigint PRIMARY KEY, name text);
CREATE TABLE child (id bigint PRIMARY KEY, parent_id bigint, a text, b int);
CREATE TABLE events (k1 int, k2 int, note text);
INSERT INTO parent SELECT g, 'p' || g FROM generate_series(1, 200) g;
INSERT INTO child SELECT g, 1 + g % 200, 'a' || g, g FROM generate_series(1, 3000) g;
INSERT INTO events SELECT g, g % 7, 'n' FROM generate_series(1, 2000) g;
""",
    "V2__constraints.sql": """
CREATE INDEX ON child (a);
ALTER TABLE child ADD FOREIGN KEY (parent_id) REFERENCES parent (id);
ALTER TABLE child ADD CONSTRAINT b_positive CHECK (b > 0);
ALTER TABLE child ALTER COLUMN b SET NOT NULL;
CREATE TABLE audit (id bigint);
""",
    "V3__keys.sql": """
ALTER TABLE child ADD UNIQUE (a, b);
ALTER TABLE events ADD PRIMARY KEY (k1, k2);
ALTER TABLE child ADD CHECK (id > 0), ALTER COLUMN a SET NOT NULL;
ALTER TABLE child ADD COLUMN owner_id bigint NULL
    CONSTRAINT child_owner_fk REFERENCES parent (id) DEFERRABLE INITIALLY DEFERRED;
""",
}


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    root = tmp_path / "set"
    root.mkdir()
    for name, text in SET.items():
        (root / name).write_text(text)
    return root


def _same_end_state(plain: str, online: str) -> None:
    assert proof.dump_differences(proof.schema_dump(plain), proof.schema_dump(online)) == []
    assert proof.row_differences(plain, online, bookkeeping={"queueguard_sqldir_ledger"}) == []


class _Writer:
    """Inserts into `child` (rows every form of the set accepts) until stopped, each insert's
    latency kept; the ids it wrote, to write the same rows into the plain twin after."""

    def __init__(self, dsn: str) -> None:
        self.dsn, self.ids, self.latencies = dsn, list[int](), list[float]()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run)

    def __enter__(self) -> _Writer:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=60)

    def _run(self) -> None:
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            n = 100_000
            while not self._stop.is_set():
                n += 1
                began = time.perf_counter()
                conn.execute(INSERT, {"n": n})
                self.latencies.append(time.perf_counter() - began)
                self.ids.append(n)
                time.sleep(0.002)


INSERT = "INSERT INTO child VALUES (%(n)s, 1, 'w' || %(n)s, 7)"


@pytest.mark.parametrize("start", ["1", "2"])
def test_every_blocking_statement_runs_online_and_ends_where_the_plain_one_ends(
    make_db: Callable[..., str], folder: Path, start: str
) -> None:
    mset = sets.load(folder)
    plain, online = make_db(), make_db()
    upgrade(mset, plain, to=start)
    upgrade(mset, online, to=start)
    upgrade(mset, plain)
    locks = LockSampler(online, table="child")
    locks.start()
    # a budget of 0 ms: every statement with a blocking lock on a filled table goes online
    with _Writer(online) as writer:
        result = upgrade_online(mset, online, budget_ms=0.0, sample_rows=500)
    locks.stop()
    kinds = {(d.revision, d.index): [f.kind for f in d.forms or ()] for d in result.decisions}
    expected = {
        ("2", 0): [choose.CONCURRENT_INDEX],
        ("2", 1): [choose.NOT_VALID],
        ("2", 2): [choose.NOT_VALID],
        ("2", 3): [choose.NOT_NULL],
        ("3", 0): [choose.UNIQUE_INDEX],
        ("3", 1): [choose.UNIQUE_INDEX],
        ("3", 2): [choose.NOT_VALID, choose.NOT_NULL],
        # a column with its foreign key inline (Django's AddField): added bare, then the key
        ("3", 3): [choose.PLAIN, choose.NOT_VALID],
    }
    assert kinds == {k: v for k, v in expected.items() if k[0] > start}
    assert result.proved and result.report is not None
    assert result.report.after == "3"
    # every blocking lock on the written table was brief while the writer ran (the budget,
    # with slack for a loaded machine: the forms take them for catalog changes only)
    assert writer.ids and locks.longest_s < 1.0, (locks.longest_s, locks.mode)
    assert max(writer.latencies) < 2.0
    with psycopg.connect(plain, autocommit=True) as conn:
        for n in writer.ids:
            conn.execute(INSERT, {"n": n})
    _same_end_state(plain, online)


def test_a_kill_inside_a_form_resumes_or_aborts_to_the_state_before_it(
    make_db: Callable[..., str], folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mset = sets.load(folder)
    before, killed, aborted = make_db(), make_db(), make_db()
    for dsn in (before, killed, aborted):
        upgrade(mset, dsn, to="2")
    rev = mset.get("3")
    pk = choose.choose(rev.statements[1], rewrites=False, created=["events_pkey"])  # type: ignore[index]
    assert isinstance(pk, list)
    for dsn in (killed, aborted):
        # what a run killed after the key columns were made NOT NULL leaves behind: the
        # statement in flight, its checks, the columns set, the index half built (invalid)
        with psycopg.connect(dsn, autocommit=True) as conn:
            with conn.transaction():
                progress.write(conn, rev, 1, encode(pk))
            conn.execute(
                "ALTER TABLE events ADD CONSTRAINT events_k1_qg_not_null CHECK (k1 IS NOT NULL)"
            )
            conn.execute("ALTER TABLE events ALTER COLUMN k1 SET NOT NULL")
            conn.execute("INSERT INTO events VALUES (1, 1, 'dup')")
            with pytest.raises(psycopg.errors.UniqueViolation):
                conn.execute("CREATE UNIQUE INDEX CONCURRENTLY events_pkey ON events (k1, k2)")
            conn.execute("DELETE FROM events WHERE note = 'dup'")
    # abort: the catalog as before the statement (statement 1 of 3 stays applied)
    with psycopg.connect(before, autocommit=True) as conn:
        conn.execute(rev.statements[0])  # type: ignore[index]
        with conn.transaction():
            progress.write(conn, rev, 1)
    with psycopg.connect(aborted, autocommit=True) as conn:
        conn.execute(rev.statements[0])  # type: ignore[index]
    done = abort.abort(mset, aborted)
    assert done.revision == "3" and done.statement == 1
    assert "dropped index events_pkey" in done.undone
    assert proof.dump_differences(proof.schema_dump(before), proof.schema_dump(aborted)) == []
    # status says what is in flight and how to go on
    assert main(["status", "--migrations", str(folder), "--dsn", killed]) == 0
    said = capsys.readouterr().out
    assert "in flight revision 3 statement 2, online: unique-index (0 of 1 done)" in said
    # rerun: the statement in flight is finished with its forms, then the rest
    with psycopg.connect(killed, autocommit=True) as conn:
        conn.execute(rev.statements[0])  # type: ignore[index]
    result = upgrade_online(mset, killed, budget_ms=0.0, sample_rows=500)
    assert result.report is not None and result.report.after == "3"
    plain = make_db()
    upgrade(mset, plain)
    _same_end_state(plain, killed)


def test_a_python_revision_over_the_budget_gets_no_form_and_a_cheap_one_needs_none() -> None:
    """An Alembic revision is Python: queueguard does not rewrite it, so a statement over the
    budget is refused by name (the runner then stops before anything runs; --force runs it
    plain); one under the budget, or on a table without rows, is left as it is."""
    rev = Revision("a1", None, "add a column", (), "", None)
    seen = Observation(
        "ALTER TABLE item ADD COLUMN label text", True, 2.0, [("item", "AccessExclusiveLock")]
    )
    line = Line("a1", 0, seen, estimate_ms=2000.0, blocking=[("item", "AccessExclusiveLock")])
    sizes = {"item": Size(rows=3000, heap_bytes=1 << 20, index_bytes=0, indexes=0)}
    [decision] = decide([(rev, [line])], 1000.0, sizes, {})
    assert decision.forms is None and decision.refusal and "Alembic revision" in decision.refusal
    assert decide([(rev, [line])], 5000.0, sizes, {}) == []
    empty = {"item": Size(rows=0, heap_bytes=8192, index_bytes=0, indexes=0)}
    assert decide([(rev, [line])], 1000.0, empty, {}) == []


def _line(rev: str, i: int, sql: str, ms: float, held: float, locks: list[str]) -> Line:
    taken = [("item", mode) for mode in locks]
    seen = Observation(sql, True, ms / 1000, taken)
    return Line(rev, i, seen, estimate_ms=ms, held_ms=held, blocking=taken)


_ITEM = {"item": Size(rows=3000, heap_bytes=1 << 20, index_bytes=1 << 18, indexes=1)}
_AEL = "AccessExclusiveLock"


def test_a_cheap_statement_whose_lock_the_next_ones_would_hold_past_the_budget_runs_alone() -> None:
    """mlflow's 181f10493468 pattern: a cheap ALTER takes ACCESS EXCLUSIVE, then an ADD
    PRIMARY KEY builds its index for 700 ms under that lock, already held, so its own line
    shows no lock. Through env.py the revision is one transaction: the ALTER's lock is held
    ~715 ms, and a 100 ms budget is not met by running it plain (it used to be, silently)."""
    python = Revision("p1", None, "metrics", (), "", None)
    alter = _line("p1", 0, "ALTER TABLE item ALTER COLUMN v TYPE float8", 15, 715, [_AEL])
    add_pk = _line("p1", 1, "ALTER TABLE item ADD PRIMARY KEY (k, v)", 700, 700, [])
    [decision] = decide([(python, [alter, add_pk])], 100.0, _ITEM, {})
    assert (decision.revision, decision.index, decision.forms) == ("p1", 0, None)
    assert decision.refusal and "Alembic revision" in decision.refusal
    assert decision.refusal.startswith("its AccessExclusiveLock on item is held ~715 ms")
    assert decide([(python, [alter, add_pk])], 1000.0, _ITEM, {}) == []

    # run as SQL (a rendered revision, any SQL set): each statement priced on its own
    sql = (
        "ALTER TABLE item ALTER COLUMN v TYPE float8",
        "ALTER TABLE item ADD PRIMARY KEY (k, v)",
    )
    rendered = Revision("s1", None, "metrics", (), "", sql)
    add_pk_alone = _line("s1", 1, sql[1], 700, 700, [_AEL])
    alter_sql = _line("s1", 0, sql[0], 15, 715, [_AEL])
    # the ADD PRIMARY KEY goes online: the runner commits before it, the ALTER's hold ends
    decisions = decide([(rendered, [alter_sql, add_pk_alone])], 100.0, _ITEM, {})
    assert [(d.index, [f.kind for f in d.forms or ()]) for d in decisions] == [
        (1, [choose.UNIQUE_INDEX])
    ]
    # a long statement with no form and no blocking lock of its own (a backfill) after a
    # cheap ALTER in the same transaction: the ALTER would be held through it, so it runs
    # alone (committed before the backfill), never held hostage
    backfill_sql = (sql[0], "UPDATE item SET v = v * 2")
    backfill = Revision("s2", None, "backfill", (), "", backfill_sql)
    update = _line("s2", 1, backfill_sql[1], 900, 900, [])
    [held] = decide(
        [(backfill, [_line("s2", 0, sql[0], 15, 915, [_AEL]), update])], 100.0, _ITEM, {}
    )
    assert (held.index, held.refusal) == (0, None)
    assert held.forms == [choose.Form(choose.PLAIN, "item", sql[0])]
    # two cheap ALTERs before it: the second runs alone, and the runner's commit before it
    # ends the first's transaction too (15 ms held)
    three = Revision("s3", None, "backfill", (), "", (sql[0], sql[0], backfill_sql[1]))
    lines3 = [
        _line("s3", 0, sql[0], 15, 930, [_AEL]),
        _line("s3", 1, sql[0], 15, 915, [_AEL]),
        _line("s3", 2, backfill_sql[1], 900, 900, []),
    ]
    assert [d.index for d in decide([(three, lines3)], 100.0, _ITEM, {})] == [1]


@pytest.mark.parametrize(
    ("index", "left_behind"),
    [
        (2, "ALTER TABLE child ADD CONSTRAINT b_positive CHECK (b > 0) NOT VALID"),
        (3, "ALTER TABLE child ADD CONSTRAINT child_b_qg_not_null CHECK (b IS NOT NULL) NOT VALID"),
    ],
)
def test_a_check_left_not_valid_by_a_kill_is_finished_by_the_rerun_or_dropped_by_abort(
    make_db: Callable[..., str], folder: Path, index: int, left_behind: str
) -> None:
    """A run killed after a NOT VALID add committed (the CHECK form, the SET NOT NULL form):
    the rerun validates it and ends the statement; abort drops it, the catalog as before."""
    mset = sets.load(folder)
    rev = mset.get("2")
    statements = rev.statements or ()
    before, killed, aborted = make_db(), make_db(), make_db()
    for dsn in (before, killed, aborted):
        upgrade(mset, dsn, to="1")
        with psycopg.connect(dsn, autocommit=True) as conn:
            for statement in statements[:index]:
                conn.execute(statement)  # type: ignore[arg-type]
            with conn.transaction():
                progress.write(conn, rev, index)
    forms = choose.choose(statements[index], rewrites=False)
    assert isinstance(forms, list)
    for dsn in (killed, aborted):
        with psycopg.connect(dsn, autocommit=True) as conn:
            with conn.transaction():
                progress.write(conn, rev, index, encode(forms))
            conn.execute(left_behind)
    assert runner.finish_in_flight(mset, killed, Limits(), {}) == f"{index + 1} of revision 2"
    plain = make_db()
    upgrade(mset, plain, to="1")
    with psycopg.connect(plain, autocommit=True) as conn:
        for statement in statements[: index + 1]:
            conn.execute(statement)  # type: ignore[arg-type]
        with conn.transaction():
            progress.write(conn, rev, index + 1)
    assert proof.dump_differences(proof.schema_dump(plain), proof.schema_dump(killed)) == []
    books = {"queueguard_sqldir_ledger", "queueguard_progress"}  # their times are the runs'
    assert proof.row_differences(plain, killed, bookkeeping=books) == []
    done = abort.abort(mset, aborted)
    assert done.undone and done.revision == "2" and done.statement == index
    assert proof.dump_differences(proof.schema_dump(before), proof.schema_dump(aborted)) == []


def test_a_long_transaction_delays_a_concurrent_build_in_its_own_database_only(
    make_db: Callable[..., str],
) -> None:
    """A concurrent build waits for every older snapshot of its own database — holding
    nobody up meanwhile, so no lock_timeout cuts the wait, only the statement timeout: a
    long transaction in another database does not hold it (PostgreSQL looks at its own
    database's transactions only); one in the same database delays it while writers go on,
    and it is built once that transaction ends. A session holding the table's own lock
    still makes it give up on the ladder."""
    target, elsewhere = make_db(), make_db()
    with psycopg.connect(target, autocommit=True) as conn:
        conn.execute("CREATE TABLE t (id int PRIMARY KEY, a int)")
        conn.execute("INSERT INTO t SELECT g, g FROM generate_series(1, 1000) g")
    [form] = choose.choose("CREATE INDEX t_a ON t (a)", rewrites=False)  # type: ignore[misc]
    limits = Limits(lock_timeout_ms=300, retries=0)

    def valid() -> tuple[bool] | None:
        with psycopg.connect(target) as conn:
            return conn.execute(  # type: ignore[return-value]
                "SELECT indisvalid FROM pg_index WHERE indexrelid = to_regclass('t_a')"
            ).fetchone()

    def drop() -> None:
        with psycopg.connect(target, autocommit=True) as conn:
            conn.execute("DROP INDEX IF EXISTS t_a")

    def older_snapshot(where: str) -> psycopg.Connection[Any]:
        old = psycopg.connect(where)
        old.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        old.execute("SELECT 1").fetchone()  # a snapshot older than the build
        with psycopg.connect(target, autocommit=True) as writer:  # the horizon moves on
            writer.execute("UPDATE t SET a = a + 1 WHERE id = 1")
        return old

    with older_snapshot(elsewhere), psycopg.connect(target) as conn:
        index.run(Context(conn, limits), form)
    assert valid() == (True,)
    drop()

    old = older_snapshot(target)
    with psycopg.connect(target) as conn:
        build = threading.Thread(target=index.run, args=(Context(conn, limits), form))
        build.start()
        build.join(2.0)  # seven times the lock_timeout
        assert build.is_alive()  # still waiting for the older snapshot…
        with psycopg.connect(target, autocommit=True) as writer:  # …blocking no writer
            writer.execute("SET lock_timeout = '1s'")
            writer.execute("UPDATE t SET a = a + 1 WHERE id = 2")
        old.close()
        build.join(30.0)
        assert not build.is_alive()
    assert valid() == (True,)
    drop()

    # whoever holds the table itself (an anti-wraparound autovacuum, DDL) still makes the
    # build give up on the ladder, with nothing built
    with psycopg.connect(target) as holder, psycopg.connect(target) as conn:
        holder.execute("LOCK TABLE t IN SHARE UPDATE EXCLUSIVE MODE")
        began = time.perf_counter()
        with pytest.raises(LockTimeout):
            index.run(Context(conn, limits), form)
        assert time.perf_counter() - began < 10.0  # the 300 ms lock_timeout, generous slack
    assert valid() is None

    # the statement timeout bounds the wait: the build stops, its invalid leftover is
    # rebuilt by the next run
    old = older_snapshot(target)
    with psycopg.connect(target) as conn, pytest.raises(psycopg.errors.QueryCanceled):
        index.run(Context(conn, Limits(300, 1000, 0)), form)
    old.close()
    assert valid() == (False,)
    with psycopg.connect(target) as conn:
        index.run(Context(conn, limits), form)
    assert valid() == (True,)


def test_a_key_inline_is_split_only_where_it_can_be_as_written() -> None:
    """A named key beside a plain column: the column bare, then the key NOT VALID (INITIALLY
    DEFERRED keeps the key deferrable); a nameless key (its name would be asked of PostgreSQL
    before the column exists) and ADD COLUMN IF NOT EXISTS are not split."""
    forms = choose.choose(
        "ALTER TABLE t ADD COLUMN c bigint CONSTRAINT k REFERENCES r (id) INITIALLY DEFERRED",
        rewrites=False,
    )
    assert isinstance(forms, list)
    assert [f.kind for f in forms] == [choose.PLAIN, choose.NOT_VALID]
    assert forms[0].sql == "ALTER TABLE t ADD COLUMN c bigint"
    assert "DEFERRABLE INITIALLY DEFERRED" in forms[1].sql and forms[1].name == "k"
    for sql in (
        "ALTER TABLE t ADD COLUMN c bigint REFERENCES r (id)",
        "ALTER TABLE t ADD COLUMN IF NOT EXISTS c bigint CONSTRAINT k REFERENCES r (id)",
        "ALTER TABLE t ADD COLUMN c bigint UNIQUE CONSTRAINT k REFERENCES r (id)",
    ):
        assert isinstance(choose.choose(sql, rewrites=False), choose.NoForm), sql
