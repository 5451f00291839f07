"""Operators on locks, read from the statement text (sqlglot keeps LOCK as a raw Command)."""

from __future__ import annotations

from collections.abc import Iterable

from queueguard.mutate.operators.base import Change, Operator
from queueguard.mutate.sites import RevisionSites, Site, is_online
from queueguard.revisions import LOCK_MODES

#: PostgreSQL's table lock modes, weakest first (the lock budgets' vocabulary).
MODES = LOCK_MODES
STRONGEST = MODES[-1]
#: History's table: the revisions only read it, so History keeps running during an upgrade.
HISTORY = "executions"


def widen_lock(site: Site, _: RevisionSites) -> Iterable[Change]:
    lock = site.lock
    if lock is None or lock.span is None or lock.mode not in MODES:
        return
    rank = MODES.index(lock.mode)
    stronger = dict.fromkeys((*MODES[rank + 1 : rank + 2], STRONGEST))
    start, end = lock.span
    for mode in stronger:
        if mode == lock.mode:
            continue
        text = site.text[:start] + mode + site.text[end:]
        yield Change(text, f"LOCK {', '.join(lock.tables)}: {lock.mode} → {mode}", site.text)


def add_lock(site: Site, revision: RevisionSites) -> Iterable[Change]:
    """After the last LOCK of the site's part (before its first statement when it has none): an
    ACCESS EXCLUSIVE lock on each table the revision only reads, and on History's table. The
    parts are the step files and the online path: each is judged on its own (`--scope`)."""
    part = revision.part(is_online(site.path))
    anchor = part.locks[-1] if part.locks else part.sites[0]
    if (site.path, site.index) != (anchor.path, anchor.index):
        return
    tables = set(part.read_only) | ({HISTORY} - part.written)
    for table in sorted(tables):
        added = f"LOCK TABLE {table} IN {STRONGEST} MODE"
        if site.lock is not None:
            text, where = f"{site.text};\n{added}", "after"
        else:
            text, where = f"{added};\n{site.text}", "before"
        first = " ".join(site.text.split())
        first = first if len(first) <= 60 else first[:59] + "…"
        yield Change(text, f"add {added} {where} {first}", site.text)


OPERATORS = (
    Operator(
        "widen-lock",
        "LOCK TABLE t IN <mode> → the next stronger mode, and ACCESS EXCLUSIVE",
        widen_lock,
    ),
    Operator(
        "add-lock",
        "add LOCK TABLE t IN ACCESS EXCLUSIVE MODE for each table the revision only reads "
        "(and executions) after its last lock",
        add_lock,
    ),
)
