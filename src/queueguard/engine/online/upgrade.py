"""`upgrade --migrations DIR --online`: the set applied as it is, every statement over the
lock budget in an online form proven on a scratch copy to end in the plain statement's
end state.

1. A statement a killed run left in flight is finished with the forms it was begun with.
2. `plan` prices every pending statement on a scratch copy; `decide` picks the statements
   over the budget and their forms (PostgreSQL's parse tree); one without a form refuses
   (`--force` runs it plain), and so does a rebuild of a table holding an object it cannot
   carry across.
3. The proof: the pending versions applied twice on copies of one sample — plain, and with
   the forms — must give a line-identical `pg_dump --schema-only` and equal rows.
4. The target: the runner applies each version in order, committing before each online
   statement, the bookkeeping in the version's last transaction.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from pglast import ast

from queueguard.engine.apply import in_flight, progress, runner
from queueguard.engine.apply.report import UpgradeReport
from queueguard.engine.apply.session import Limits
from queueguard.engine.online import apply, choose, orphans, plain_side, proof
from queueguard.engine.online.apply import OnlinePlan
from queueguard.engine.online.decide import Decision, decide, holds_over, over_budget
from queueguard.engine.online.plain_side import PlainSide, take_over
from queueguard.engine.plan import planner, sample
from queueguard.errors import NoOnlineForm, OnlineProofFailed
from queueguard.pg import scratch
from queueguard.pg.scratch import ScratchDatabases
from queueguard.sets import MigrationSet

DEFAULT_BUDGET_MS = 1000.0
#: the brief locks of the forms wait at most 500 ms each (a waiting ACCESS EXCLUSIVE queues
#: every reader and writer behind it), retried 10 times on the ladder
ONLINE_LIMITS = Limits(lock_timeout_ms=500, retries=10)


@dataclass
class OnlineUpgrade:
    """What `upgrade --online` decided, proved and did."""

    decisions: list[Decision] = field(default_factory=list)
    forced: list[Decision] = field(default_factory=list)
    report: UpgradeReport | None = None
    proved: bool = False


def _start(mset: MigrationSet, dsn: str) -> dict[str, int]:
    """{revision: first statement not yet applied} from the target's progress rows."""
    with sample.read_only(dsn) as conn:
        found = progress.read(conn)
        conn.rollback()
    return {rev: index for rev, (index, _) in found.items() if rev in mset.ids}


def _sizes(dsn: str) -> Mapping[str, Any]:
    with sample.read_only(dsn) as conn:
        return sample.sizes(conn)


def _refusals(decisions: list[Decision], dsn: str) -> None:
    """Each rebuild's table checked for objects it cannot carry across (read only)."""
    rebuilds = [d for d in decisions if d.forms and any(f.kind == choose.REBUILD for f in d.forms)]
    if not rebuilds:
        return
    rebuild = apply.module(choose.REBUILD)
    with sample.read_only(dsn) as conn:
        for decision in rebuilds:
            for form in decision.forms or ():
                if form.kind == choose.REBUILD:
                    reasons = rebuild.refusals(conn, form)
                    if reasons:
                        decision.refusal = "; ".join(reasons)
                        decision.forms = None
        conn.rollback()


def _volatile(decisions: list[Decision]) -> dict[str, set[str]]:
    """{table: columns a rebuilt statement adds}: filled by their default row by row, which
    may be volatile (the proof then asks only for a value where the plain row has one)."""
    found: dict[str, set[str]] = {}
    for decision in decisions:
        for form in decision.forms or ():
            if form.kind != choose.REBUILD:
                continue
            node = choose.parse_one(form.sql)
            assert isinstance(node, ast.AlterTableStmt)
            table = str(node.relation.relname) if node.relation else form.table
            for cmd in node.cmds or ():
                if isinstance(cmd.def_, ast.ColumnDef) and cmd.def_.colname:
                    found.setdefault(table, set()).add(str(cmd.def_.colname))
    return found


Replan = Callable[[MigrationSet], planner.Plan]


def _as_sql(
    mset: MigrationSet, bill: planner.Plan, sent: Mapping[str, list[str]], tables: Collection[str]
) -> tuple[MigrationSet, dict[str, str]]:
    """The set with the revisions of `sent` run as SQL where they can be: an Alembic
    revision as its rendered SQL (`alembic_sql`), a Django migration as the SQL its migrate
    sent (`django_sql`); and why not, for the others."""
    if mset.format == "django":
        from queueguard.engine.formats.django import online_sql as django_sql

        return django_sql.convert(mset, bill, sent, tables)
    from queueguard.engine.formats.alembic import online_sql as alembic_sql

    return alembic_sql.convert(mset, sent)


def decisions_of(
    mset: MigrationSet,
    dsn: str,
    bill: planner.Plan,
    budget_ms: float,
    start: Mapping[str, int] | None = None,
) -> list[Decision]:
    """The statements of `bill` over the budget with their forms, each rebuild's table
    checked for what it cannot carry across (the target only read)."""

    def replan(view: MigrationSet) -> planner.Plan:
        return planner.plan(
            view, dsn, to=bill.target, max_lock_ms=budget_ms, sample_rows=bill.sample_rows,
            start=start,
        )  # fmt: skip

    return decide_set(mset, dsn, bill, budget_ms, start, replan)[1]


def decide_set(
    mset: MigrationSet,
    dsn: str,
    bill: planner.Plan,
    budget_ms: float,
    start: Mapping[str, int] | None,
    replan: Replan,
) -> tuple[MigrationSet, list[Decision]]:
    """`decisions_of`, and the set as it will run: an Alembic revision with a statement
    over the budget as its rendered SQL where that is what the driver sent (`alembic_sql`),
    a Django migration as the SQL its migrate sent where that is all it did (`django_sql`).
    Such a revision is priced again (`replan`), statement by statement as the SQL formats
    are: through its tool its statements share one transaction, so a lock an earlier one
    took does not show on a later one, which on this path may run after a commit."""
    sizes = _sizes(dsn)
    unrendered: dict[str, str] = {}
    if mset.format in ("alembic", "django"):
        # a revision under the budget on one bill may be over it on the next (its timings
        # are measured again): it is tried as its rendered SQL too, at most twice more
        tried: set[str] = set()
        for _ in range(3):
            sent = {
                rid: [line.seen.sql for line in lines]
                for rid, lines in bill.revisions
                if rid not in tried
                and mset.get(rid).statements is None
                and any(
                    over_budget(line, budget_ms, sizes) or holds_over(line, budget_ms, sizes)
                    for line in lines
                )
            }
            if not sent:
                break
            tried.update(sent)
            view, refused = _as_sql(mset, bill, sent, sizes.keys())
            unrendered.update(refused)
            if view is mset:
                break
            mset, bill = view, replan(view)
    revisions = [(mset.get(rid), lines) for rid, lines in bill.revisions]
    decisions = decide(revisions, budget_ms, sizes, start or {}, unrendered, mset.format)
    _refusals(decisions, dsn)
    return mset, decisions


def prove(
    mset: MigrationSet,
    online: OnlinePlan,
    databases: ScratchDatabases,
    base: str,
    *,
    to: str | None,
    volatile: Mapping[str, Collection[str]],
    plain_set: MigrationSet | None = None,
    plain: PlainSide | None = None,
) -> list[str]:
    """The differences between the plain and the online end state on two clones of the
    sample database `base` (empty: proved). `plain_set`: the set as the plain upgrade runs
    it, where `mset` runs some of its revisions otherwise (an Alembic revision as its
    rendered SQL: the plain side runs it through env.py). `plain`: the plain side, started
    already (`plain_side.early`); else it starts here, beside the online side."""
    twin = databases.create(template=base)
    take_over(mset, twin, base)
    # the two sides at once, the plain one on a thread of its own: each is mostly the server
    # rewriting and indexing its own copy (the sample: 100 k rows, as long as the whole
    # table at that size), and one after the other they added both to every run's time (an
    # Alembic set's env.py runs are one at a time in a process: those parts take turns)
    plain = plain or PlainSide(databases, base, plain_set or mset, to)
    # the sample's rebuild is not the target's: its progress is not reported as the target's
    quiet = {k: v for k, v in online.options.items() if k != "on_progress"}
    try:
        runner.upgrade(mset, twin, to=to, online=replace(online, options=quiet))
    except BaseException:
        plain.discard()
        raise
    plain_dsn = plain.result()
    found = proof.dump_differences(proof.schema_dump(plain_dsn), proof.schema_dump(twin))
    found += proof.row_differences(plain_dsn, twin, volatile=volatile, bookkeeping=mset.bookkeeping)
    return found


def as_resumed(mset: MigrationSet, dsn: str) -> MigrationSet:
    """The set as a rerun must run it: an Alembic revision a killed run left part applied
    (its progress row) as the rendered SQL it was begun as, a Django migration as the SQL
    its migrate sent."""
    if mset.format == "django":  # as the SQL its migrate sent, kept with the progress row
        from queueguard.engine.formats.django import online_sql as django_sql

        with sample.read_only(dsn) as conn:
            kept = progress.statements(conn)
            conn.rollback()
        return django_sql.resumed(mset, kept)
    if mset.format != "alembic":
        return mset
    with sample.read_only(dsn) as conn:
        found = progress.read(conn)
        conn.rollback()
    if not found:
        return mset
    from queueguard.engine.formats.alembic import online_sql as alembic_sql

    return alembic_sql.resumed(mset, sorted(found))


@dataclass
class Prepared:
    """What the target's sample decided and proved: the set as it will run (an Alembic
    revision as its rendered SQL where a statement of it goes online), the forms, the
    decisions, the statements run plain by --force."""

    mset: MigrationSet
    online: OnlinePlan
    decisions: list[Decision] = field(default_factory=list)
    forced: list[Decision] = field(default_factory=list)
    proved: bool = False


def prepare(
    mset: MigrationSet,
    dsn: str,
    *,
    to: str | None = None,
    budget_ms: float = DEFAULT_BUDGET_MS,
    force: bool = False,
    options: Mapping[str, Any] | None = None,
    scratch_admin: str | None = None,
    sample_rows: int = sample.DEFAULT_ROWS,
    start: Mapping[str, int] | None = None,
    plain_set: MigrationSet | None = None,
    tell: Callable[[str], None] = lambda _: None,
) -> Prepared:
    """Steps 2 and 3 on a sample of the target at `dsn` (only read): the statements over
    the budget, their forms, and the proof (`fleet upgrade --online` prepares once per
    group of targets at one revision and catalog, on the group's largest)."""
    admin = scratch_admin or scratch.database_dsn(dsn, "postgres")
    start = start or {}
    with ScratchDatabases(admin, prefix="qgonline") as databases:
        # one sample of the target for plan and for both sides of the proof
        tell("sample: the target's schema and a sample of its rows on a scratch copy")
        base = databases.create()
        sizes = sample.build(dsn, base, sample_rows)
        take_over(mset, base, scratch.dbname_of(dsn))
        # the proof's plain side does not depend on plan: a set of SQL revisions starts it
        # now, beside plan (a killed run's rerun proves the statements left, as before)
        sql_only = not start and all(r.statements is not None for r in mset.revisions)
        pending = mset.pending(planner.current_revision(mset, dsn), to) if sql_only else []
        with plain_side.early(
            databases, scratch.dbname_of(base), plain_set or mset, to, pending
        ) as early:
            tell("plan: pricing every pending statement on a clone of the sample")
            bill = planner.plan(
                mset, dsn, to=to, scratch_admin=admin, max_lock_ms=budget_ms,
                sample_rows=sample_rows, start=start, prepared=(scratch.dbname_of(base), sizes),
            )  # fmt: skip

            def replan(view: MigrationSet) -> planner.Plan:
                tell("plan: pricing again the revisions run as SQL, statement by statement")
                return planner.plan(
                    view, dsn, to=to, scratch_admin=admin, max_lock_ms=budget_ms,
                    sample_rows=sample_rows, start=start,
                    prepared=(scratch.dbname_of(base), sizes),
                )  # fmt: skip

            mset, decisions = decide_set(mset, dsn, bill, budget_ms, start, replan)
            refused = [d for d in decisions if d.forms is None]
            if refused and not force:
                raise NoOnlineForm(_refused(refused, budget_ms))
            online = OnlinePlan(
                {(d.revision, d.index): d.forms for d in decisions if d.forms}, options or {}
            )
            prepared = Prepared(mset, online, decisions, refused)
            if online.forms:
                tell(f"proof: {len(online.forms)} statement(s) online and plain on two clones")
                differences = prove(
                    mset, online, databases, scratch.dbname_of(base), to=to,
                    volatile=_volatile(decisions), plain_set=plain_set if not start else None,
                    plain=early,
                )  # fmt: skip
                if differences:
                    raise OnlineProofFailed(
                        "the online forms do not end where the plain statements end; nothing "
                        "ran on the target:\n" + "\n".join(f"  {d}" for d in differences[:20])
                    )
                prepared.proved = True
    return prepared


def settle(
    mset: MigrationSet,
    dsn: str,
    limits: Limits,
    options: Mapping[str, Any] | None,
    tell: Callable[[str], None],
) -> tuple[MigrationSet, dict[str, int]]:
    """Step 1: a killed run's leftovers settled and its statement in flight finished; the
    set as a rerun must run it, and the statements a killed run left part applied."""
    mset = as_resumed(mset, dsn)
    orphans.settle(dsn, tell)
    finished = in_flight.finish_in_flight(mset, dsn, limits, options or {})
    if finished:
        tell(f"finished statement {finished} that a previous run left in flight")
    return mset, _start(mset, dsn)


def upgrade_online(
    mset: MigrationSet,
    dsn: str,
    *,
    to: str | None = None,
    limits: Limits | None = None,
    budget_ms: float = DEFAULT_BUDGET_MS,
    force: bool = False,
    options: Mapping[str, Any] | None = None,
    scratch_admin: str | None = None,
    sample_rows: int = sample.DEFAULT_ROWS,
    tell: Callable[[str], None] = lambda _: None,
) -> OnlineUpgrade:
    limits = limits or ONLINE_LIMITS
    result = OnlineUpgrade()
    plain_set = mset
    mset, start = settle(mset, dsn, limits, options, tell)
    if not mset.pending(planner.current_revision(mset, dsn), to):
        result.report = runner.upgrade(mset, dsn, to=to, limits=limits)
        return result
    prepared = prepare(
        mset, dsn, to=to, budget_ms=budget_ms, force=force, options=options,
        scratch_admin=scratch_admin, sample_rows=sample_rows, start=start,
        plain_set=plain_set, tell=tell,
    )  # fmt: skip
    result.decisions, result.forced, result.proved = (
        prepared.decisions, prepared.forced, prepared.proved,
    )  # fmt: skip
    result.report = runner.upgrade(prepared.mset, dsn, to=to, limits=limits, online=prepared.online)
    return result


def _refused(refused: list[Decision], budget_ms: float) -> str:
    lines = [
        f"{len(refused)} statement(s) over the {budget_ms:.0f} ms lock budget have no online "
        "form; nothing was changed (--force runs them plain):"
    ]
    for d in refused:
        text = " ".join(d.line.seen.sql.split())[:120]
        lines.append(
            f"  revision {d.revision} statement {d.index + 1} (~{d.line.estimate_ms:.0f} ms): "
            f"{d.refusal}\n    {text}"
        )
    return "\n".join(lines)
