"""verify's chain (`verify.checks`): every revision of a set applied to an empty database
(or the `--base` schema) by the runner, one at a time, each traced by `plan`'s tracer on a
second database kept at the same revision and timed by the runner. SQL revisions go one
`upgrade --to` at a time; Python ones (Alembic) in one env.py run on each database, as
`upgrade` runs them, each revision's statements told apart by the per-revision hook.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from queueguard.engine.apply.report import Step
from queueguard.engine.apply.runner import upgrade
from queueguard.engine.apply.session import Limits
from queueguard.engine.plan import apply
from queueguard.engine.plan.observe import Observation
from queueguard.engine.plan.planner import python_tracer, trace
from queueguard.engine.verify import data
from queueguard.engine.verify.report import Check, RevisionTrace, SetVerifyReport, Statement
from queueguard.errors import MigrationError, QueueguardError
from queueguard.sets import MigrationSet, Revision
from queueguard.sets.model import heads_of

Progress = Callable[[str], None]


#: what a first revision fails with when its objects come from elsewhere (the
#: application's create_all()): undefined table, column, object, function, schema
_NEEDS_A_BASE = {"42P01", "42703", "42704", "42883", "3F000"}


def load_base(base: Path | None, databases: tuple[str, ...], report: SetVerifyReport) -> bool:
    """The --base schema loaded into the chain's databases; False (a failed chain check)
    when it does not load."""
    if base is None:
        return True
    try:
        for dsn in databases:
            data.load_file(base, dsn)
    except data.LoadFailed as exc:
        report.checks.append(
            Check("chain", False, f"--base {base.name} could not be loaded", problems=[str(exc)])
        )
        return False
    return True


def _cannot_start_empty(rev: Revision, exc: QueueguardError, mset: MigrationSet) -> str | None:
    """The one line for a chain whose first revision needs objects it does not create."""
    if rev is not mset.revisions[0] or getattr(exc, "sqlstate", None) not in _NEEDS_A_BASE:
        return None
    first = str(exc).splitlines()[0]
    return (
        f"the chain cannot start from an empty database: {first}; its first tables come "
        "from elsewhere (the application's create_all()?): give them with --base FILE"
    )


def _from_elsewhere(exc: QueueguardError, mset: MigrationSet) -> str | None:
    """The --base line for a later revision failing on a relation no revision of the set
    creates (Galaxy's first revision is empty: its second fails on `workflow`)."""
    if getattr(exc, "sqlstate", None) not in _NEEDS_A_BASE:
        return None
    missing = _MISSING_RELATION.search(str(exc))
    if missing is None or _created(mset, missing["name"]):
        return None
    return (
        f"no revision of the set creates {missing['name']}: it comes from elsewhere (the "
        "application's create_all()?), which must make it before the revisions run: give "
        "it with --base FILE"
    )


#: PostgreSQL's undefined_table message, the relation's name as the statement spelt it
_MISSING_RELATION = re.compile(r'relation "(?:[^".]+\.)?(?P<name>[^"]+)" does not exist')


def _created(mset: MigrationSet, name: str) -> bool:
    """Whether a revision of the set creates relation `name`, read from its SQL or, for a
    Python revision, its file (`op.create_table("name"`, or CREATE … name in its SQL)."""
    quoted = re.escape(name)
    pattern = re.compile(
        rf"create_table\(\s*['\"]{quoted}['\"]|"
        rf"\bCREATE\s+(?:[A-Z]+\s+)*(?:TABLE|VIEW)\s+(?:IF\s+NOT\s+EXISTS\s+)?"
        rf"(?:[\w\"]+\.)?\"?{quoted}\"?(?![\w])",
        re.IGNORECASE,
    )
    for rev in mset.revisions:
        texts = rev.statements or [_text(path) for path in rev.files]
        if any(pattern.search(text) for text in texts):
            return True
    return False


def _text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):  # unreadable: said to create nothing
        return ""


def run_chain(
    mset: MigrationSet,
    chain: str,
    watched: str,
    report: SetVerifyReport,
    limits: Limits | None,
    tell: Progress,
    *,
    based: bool = False,
) -> bool:
    """Every revision in turn: applied on `chain` by the runner, traced on `watched`."""
    if mset.revisions and mset.revisions[0].statements is None:
        return _python_chain(mset, chain, watched, report, limits, tell, based=based)
    for rev in mset.revisions:
        steps: list[Step] = []
        traced = RevisionTrace(rev.id, rev.title)
        report.revisions.append(traced)
        try:
            upgrade(mset, chain, to=rev.id, limits=limits, on_step=steps.append)
        except QueueguardError as exc:
            traced.error = str(exc)
            return _chain_failed(mset, rev, exc, report, based)
        try:
            traced.statements = _statements(rev, trace(mset, rev, watched), steps)
        except MigrationError as exc:
            traced.error = f"traced on a second database: {exc}"
            report.checks.append(
                Check(
                    "chain",
                    False,
                    f"revision {rev.id} applied, but failed when traced on a second database",
                    problems=[str(exc)],
                )
            )
            return False
        tell(f"revision {rev.id}: {len(traced.statements)} statement(s)")
    return _chain_passed(mset, report, based)


def _chain_failed(
    mset: MigrationSet, rev: Revision, exc: QueueguardError, report: SetVerifyReport, based: bool
) -> bool:
    empty = None if based else _cannot_start_empty(rev, exc, mset)
    if empty is not None:
        report.checks.append(Check("chain", False, empty))
    else:
        elsewhere = None if based else _from_elsewhere(exc, mset)
        problems = [str(exc)] + ([elsewhere] if elsewhere else [])
        report.checks.append(
            Check("chain", False, f"revision {rev.id} did not apply", problems=problems)
        )
    return False


def _python_chain(
    mset: MigrationSet,
    chain: str,
    watched: str,
    report: SetVerifyReport,
    limits: Limits | None,
    tell: Progress,
    *,
    based: bool,
) -> bool:
    """Python revisions: one env.py run per database (as `upgrade` runs them, each revision
    in its own transaction), each revision's statements told apart by the run's hook."""
    steps: list[Step] = []
    failure: QueueguardError | None = None
    try:
        upgrade(mset, chain, limits=limits, on_step=steps.append)
    except QueueguardError as exc:
        failure = exc
    at = data.at_revision(mset, chain)
    if mset.format == "django":  # what migrate applied from empty: squashes, not originals
        done = set(heads_of(at))
        applied = [r for r in mset.pending(None) if r.id in done]
    elif mset.steps is not None:  # a set that branches: what upgrading from `at` would not apply
        left = {r.id for r in mset.pending(at)}
        applied = [r for r in mset.revisions if r.id not in left]
    else:
        applied = list(mset.revisions[: mset.ids.index(at) + 1]) if at in mset.ids else []
    try:
        traced = python_tracer(mset)(mset, watched, applied)
    except MigrationError as exc:
        failed = RevisionTrace(applied[-1].id, applied[-1].title, error=str(exc))
        report.revisions.append(failed)
        detail = "the revisions applied, but failed when traced on a second database"
        report.checks.append(Check("chain", False, detail, problems=[str(exc)]))
        return False
    for done in traced:
        rev = done.revision
        mine = [s for s in steps if s.revision == rev.id]
        report.revisions.append(RevisionTrace(rev.id, rev.title, _statements(rev, done.seen, mine)))
        tell(f"revision {rev.id}: {len(report.revisions[-1].statements)} statement(s)")
    if failure is not None:
        rev = mset.revisions[len(applied)] if len(applied) < len(mset.revisions) else applied[-1]
        report.revisions.append(RevisionTrace(rev.id, rev.title, error=str(failure)))
        return _chain_failed(mset, rev, failure, report, based)
    return _chain_passed(mset, report, based)


def _chain_passed(mset: MigrationSet, report: SetVerifyReport, based: bool) -> bool:
    start = "the --base schema" if based else "empty"
    if mset.format == "django":  # one migrate run; a squash applied instead of its originals
        count = len(report.revisions)
        detail = f"{count} migration(s) applied by Django's migrate, {start} to every leaf"
    else:
        count = len(mset.revisions)
        detail = f"{count} revision(s) applied one at a time, {start} to {mset.span}"
    report.checks.append(Check("chain", True, detail))
    return True


def _statements(rev: Revision, seen: list[Observation], steps: list[Step]) -> list[Statement]:
    """The tracer's observations with their place in the revision and the runner's timing
    (SQL revisions: the statements that are not transaction control, in order)."""
    if rev.statements is None:
        places = list(range(len(seen)))
    else:
        places = [i for i, s in enumerate(rev.statements) if not apply.is_transaction_control(s)]
    timed = {sent.index: sent for sent in steps}
    # a Python revision's steps are what the runner saw at the driver: matched by text, in
    # order (the tracer leaves the driver's introspection out)
    by_text: dict[str, list[Step]] = {}
    for sent in steps:
        by_text.setdefault(sent.sql, []).append(sent)
    out = []
    for place, observed in zip(places, seen, strict=False):
        step: Step | None
        if rev.statements is not None:
            step = timed.get(place)
        else:
            same = by_text.get(observed.sql, [])
            step = same.pop(0) if same else None
        out.append(
            Statement(
                index=place + 1,
                sql=observed.sql,
                transactional=observed.transactional,
                locks=list(observed.locks),
                created=list(observed.created),
                rewrites=list(observed.rewrites),
                scans=list(observed.scans),
                seconds=step.seconds if step else observed.seconds,
                held_s=step.held_s if step else None,
            )
        )
    return out
