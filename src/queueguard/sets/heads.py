"""Several heads judged by what they are (an Alembic set): heads that share an ancestor are a
fork nobody merged (`upgrade head` fails on them, and merging them is the fix); heads whose
histories share nothing each end a base of their own — independent histories by design (as
Galaxy's `gxy` and `tsi`, which may even live in separate databases), upgraded together by
`heads` or one by one by `BRANCH@head`, and never to be merged."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol


class Revision(Protocol):
    """What is read of a revision here (`sets.model.Revision`, which imports this module)."""

    @property
    def id(self) -> str: ...
    @property
    def down(self) -> str | None: ...
    @property
    def native(self) -> Mapping[str, Any]: ...


#: the revision-native key an Alembic revision's own branch labels are kept under
LABELS = "branch_labels"


def _parents(revisions: Iterable[Revision]) -> dict[str, tuple[str, ...]]:
    return {r.id: tuple(r.down.split(",")) if r.down else () for r in revisions}


def history(parents: dict[str, tuple[str, ...]], head: str) -> set[str]:
    """`head` and every revision before it."""
    seen, stack = set(), [head]
    while stack:
        rev = stack.pop()
        if rev not in seen:
            seen.add(rev)
            stack.extend(p for p in parents.get(rev, ()) if p in parents)
    return seen


def lineages(revisions: Sequence[Revision], heads: Sequence[str]) -> list[tuple[str, ...]]:
    """The heads grouped by shared history: heads with a common ancestor (directly or through
    another head of the group) in one group, each group's heads sorted."""
    parents = _parents(revisions)
    groups: list[tuple[set[str], list[str]]] = []
    for head in sorted(heads):
        seen, members = history(parents, head), [head]
        for group in [g for g in groups if g[0] & seen]:
            groups.remove(group)
            seen |= group[0]
            members += group[1]
        groups.append((seen, members))
    return sorted(tuple(sorted(members)) for _, members in groups)


def forks(revisions: Sequence[Revision], heads: Sequence[str]) -> list[tuple[str, ...]]:
    """The groups of heads that share history: each a fork to merge."""
    return [group for group in lineages(revisions, heads) if len(group) > 1]


def independent(revisions: Sequence[Revision], heads: Sequence[str]) -> tuple[str, ...]:
    """The heads alone in their history, when there are several histories."""
    found = lineages(revisions, heads)
    if len(found) < 2:
        return ()
    return tuple(group[0] for group in found if len(group) == 1)


def labels_of(revisions: Sequence[Revision], head: str) -> tuple[str, ...]:
    """The branch labels on `head`'s history (what `BRANCH@head` can name it by)."""
    by_id = {r.id: r for r in revisions}
    found = {
        label
        for rev in history(_parents(revisions), head)
        for label in by_id[rev].native.get(LABELS, ())
    }
    return tuple(sorted(found))


def independent_text(revisions: Sequence[Revision], heads: Sequence[str]) -> tuple[str, str]:
    """(what the independent heads are, what to do) — never a merge."""
    alone = independent(revisions, heads)
    named = [(h, labels_of(revisions, h)) for h in alone]
    said = ", ".join(f"{h} ({'@'.join(ls[:1]) or 'no branch label'})" for h, ls in named)
    what = (
        f"{len(alone)} heads of independent histories, each from a base of its own: {said} "
        "— heads by design, not a fork; `upgrade` with no --to (or --to heads) applies "
        "every one, `--to BRANCH@head` one of them"
    )
    if all(ls for _, ls in named):
        return what, "nothing to merge: independent bases are never merged"
    return what, (
        "give each base a branch label (branch_labels) so BRANCH@head can name it; "
        "independent bases are never merged"
    )
