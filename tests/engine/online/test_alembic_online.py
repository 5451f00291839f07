"""`upgrade --migrations DIR --online` of an Alembic project: a revision whose statements
`alembic upgrade --sql` renders exactly as the driver sent them on plan's scratch copy runs
as that SQL with the online forms, and ends where the revision run through env.py ends
(schema dump, rows, the version row); any other revision over the budget is refused by
name, nothing changed; a kill in flight resumes or aborts."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest

from bench.engine.online import LockSampler
from queueguard import sets
from queueguard.cli import main
from queueguard.engine.apply import progress
from queueguard.engine.apply.runner import upgrade
from queueguard.engine.formats.alembic import online_sql as alembic_sql
from queueguard.engine.online import abort, choose, proof
from queueguard.engine.online.apply import encode
from queueguard.engine.online.upgrade import as_resumed, upgrade_online
from queueguard.errors import NoOnlineForm
from queueguard.sets import alembic as alembic_format
from queueguard.sets.alembic_render import Rendered

SET = Path(__file__).parent / "data" / "alembic_tickets"
WRITE = "INSERT INTO ticket (id, title, amount) VALUES (%(n)s, 'w' || %(n)s, %(n)s)"


def _same_end_state(plain: str, online: str) -> None:
    assert proof.dump_differences(proof.schema_dump(plain), proof.schema_dump(online)) == []
    assert proof.row_differences(plain, online, bookkeeping={"alembic_version"}) == []


def test_a_rendered_revision_runs_online_and_ends_where_env_py_ends(
    make_db: Callable[..., str],
) -> None:
    mset = sets.load(SET)
    plain, online = make_db(), make_db()
    for dsn in (plain, online):
        upgrade(mset, dsn, to="a1")
    upgrade(mset, plain, to="a2")  # through env.py
    locks = LockSampler(online, table="ticket")
    locks.start()
    written: list[int] = []
    with psycopg.connect(online, autocommit=True) as writer:
        # a budget of 0 ms: every statement with a blocking lock on the filled table goes online

        def write(_phase: str, _done: int, _total: int | None) -> None:
            written.append(10_000 + len(written))
            writer.execute(WRITE, {"n": written[-1]})

        result = upgrade_online(
            mset, online, to="a2", budget_ms=0.0, sample_rows=500,
            options={"on_progress": write},
        )  # fmt: skip
    locks.stop()
    kinds = {(d.revision, d.index): [f.kind for f in d.forms or ()] for d in result.decisions}
    assert kinds == {
        ("a2", 0): [choose.CONCURRENT_INDEX],
        ("a2", 1): [choose.REBUILD],
        ("a2", 2): [choose.NOT_VALID],
    }
    assert result.proved and result.report is not None and result.report.after == "a2"
    assert alembic_format.current(online) == "a2"
    assert written and locks.longest_s < 1.0, (locks.longest_s, locks.mode)
    with psycopg.connect(plain, autocommit=True) as conn:
        for n in written:
            conn.execute(WRITE, {"n": n})
        # the writer's rows took ids of their own: the BIGSERIAL's sequence is not moved
    _same_end_state(plain, online)
    # nothing of queueguard's is left behind
    with psycopg.connect(online) as conn:
        left = conn.execute(
            "SELECT to_regclass('queueguard_progress'), "
            "(SELECT count(*) FROM pg_namespace WHERE nspname LIKE 'queueguard%%')"
        ).fetchone()
    assert left == (None, 0)


def test_a_revision_that_reads_rows_is_refused_by_name_and_force_runs_it_plain(
    make_db: Callable[..., str], capsys: pytest.CaptureFixture[str]
) -> None:
    mset = sets.load(SET)
    dsn = make_db()
    upgrade(mset, dsn, to="a1")
    # plan --online: the rendered revision's forms; the one that reads rows has none
    assert (
        main(["plan", "--migrations", str(SET), "--dsn", dsn, "--online", "--max-lock", "0ms"]) == 1
    )
    said = capsys.readouterr().out
    assert "concurrent-index on ticket" in said and "rebuild on ticket" in said
    assert "not-valid on ticket" in said
    assert "revision a3 statement 2" in said and "cannot render it" in said
    upgrade(mset, dsn, to="a2")
    with pytest.raises(NoOnlineForm) as refused:
        upgrade_online(mset, dsn, budget_ms=0.0, sample_rows=500)
    said = str(refused.value)
    assert "revision a3 statement 2" in said  # after its SELECT
    assert "cannot render it" in said and "ADD COLUMN note" in said
    assert alembic_format.current(dsn) == "a2"  # nothing changed
    result = upgrade_online(mset, dsn, budget_ms=0.0, sample_rows=500, force=True)
    assert [d.revision for d in result.forced] == ["a3"]
    assert alembic_format.current(dsn) == "a3"


def test_a_kill_in_flight_resumes_from_the_rendering_or_aborts(
    make_db: Callable[..., str], capsys: pytest.CaptureFixture[str]
) -> None:
    mset = sets.load(SET)
    plain, killed, aborted, before = make_db(), make_db(), make_db(), make_db()
    for dsn in (plain, killed, aborted, before):
        upgrade(mset, dsn, to="a1")
    upgrade(mset, plain, to="a2")
    view = alembic_sql.resumed(mset, ["a2"])
    rev = view.get("a2")
    assert rev.statements is not None
    forms = choose.choose(rev.statements[0], rewrites=False)
    assert isinstance(forms, list)
    for dsn in (killed, aborted):
        # what a run killed in the concurrent build leaves: the statement in flight, and
        # the index half built (invalid)
        with psycopg.connect(dsn, autocommit=True) as conn:
            with conn.transaction():
                progress.write(conn, rev, 0, encode(forms))
            conn.execute("INSERT INTO ticket VALUES (1, 'dup', 1) ON CONFLICT DO NOTHING")
            conn.execute("ALTER TABLE ticket DROP CONSTRAINT ticket_pkey")
            conn.execute("INSERT INTO ticket VALUES (1, 'dup', 1)")
            with pytest.raises(psycopg.errors.UniqueViolation):
                conn.execute("CREATE UNIQUE INDEX CONCURRENTLY ix_ticket_title ON ticket (id)")
            conn.execute("DELETE FROM ticket WHERE title = 'dup'")
            conn.execute("ALTER TABLE ticket ADD PRIMARY KEY (id)")
    assert main(["status", "--migrations", str(SET), "--dsn", killed]) == 0
    assert "in flight revision a2 statement 1, online: concurrent-index" in capsys.readouterr().out
    done = abort.abort(as_resumed(mset, aborted), aborted)
    assert done.revision == "a2" and done.statement == 0
    assert "dropped index ix_ticket_title" in done.undone
    assert alembic_format.current(aborted) == "a1"
    with psycopg.connect(before, autocommit=True) as conn:  # the same key, rebuilt as above
        conn.execute("ALTER TABLE ticket DROP CONSTRAINT ticket_pkey")
        conn.execute("ALTER TABLE ticket ADD PRIMARY KEY (id)")
    assert proof.dump_differences(proof.schema_dump(before), proof.schema_dump(aborted)) == []
    # the rerun: the statement in flight finished with its forms, the revision's rest online
    result = upgrade_online(mset, killed, budget_ms=0.0, sample_rows=500, to="a2")
    assert result.report is not None and alembic_format.current(killed) == "a2"
    with psycopg.connect(plain, autocommit=True) as conn:
        conn.execute("ALTER TABLE ticket DROP CONSTRAINT ticket_pkey")
        conn.execute("ALTER TABLE ticket ADD PRIMARY KEY (id)")
    _same_end_state(plain, killed)


@pytest.mark.parametrize(
    ("rendered", "sent", "why"),
    [
        (["CREATE INDEX ix ON t (a)"], ["CREATE INDEX ix ON t (a)\n\n"], None),
        (["ALTER TABLE t ADD c int"], ["alter table t\n  add c INT -- a comment"], None),
        (
            ["INSERT INTO t (a) VALUES (1)"],
            ["INSERT INTO t (a) VALUES (%(a)s)"],
            "statement 1 as `alembic upgrade --sql` renders it is not what the driver sent",
        ),
        (["UPDATE t SET a = 'x  y'"], ["UPDATE t SET a = 'x y'"], "is not what the driver"),
        (["CREATE INDEX ix ON t (a)"], [], "renders 1 statement(s) where the driver sent 0"),
    ],
)
def test_a_rendering_is_the_driver_s_statements_or_says_where_not(
    rendered: list[str], sent: list[str], why: str | None
) -> None:
    found = alembic_sql.difference(Rendered(tuple(rendered), ()), sent)
    assert (found is None) if why is None else (found is not None and why in found)
