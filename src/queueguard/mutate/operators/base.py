"""What an operator is, and the one way operators edit a statement's syntax tree."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from sqlglot import exp

from queueguard.mutate.sites import RevisionSites, Site


@dataclass(frozen=True)
class Change:
    """One proposed mutation of one statement."""

    #: the statement's new text ('' drops it)
    text: str
    description: str
    #: the left side of the mutant's diff: the statement as rendered unchanged
    before: str
    #: offsets in the file to replace (default: the statement's own span)
    span: tuple[int, int] | None = None
    #: made on the syntax tree (the text after the site's prefix must parse back into one)
    tree: bool = False


Generate = Callable[[Site, RevisionSites], Iterable[Change]]


@dataclass(frozen=True)
class Operator:
    name: str
    summary: str
    generate: Generate


#: An edit of one node of a copied tree: mutate it in place (return None) or return the node
#: that replaces it.
Apply = Callable[[exp.Expr], exp.Expr | None]
Edit = tuple[Apply, str]


def tree_changes(site: Site, edits: Callable[[exp.Expr], Iterable[Edit]]) -> Iterator[Change]:
    """Each edit `edits(node)` proposes for a node of the site's tree (depth first, in
    source order), applied to its own copy of the tree."""
    if site.body is None or site.rendered is None:
        return
    for i, node in enumerate(list(site.body.walk(bfs=False))):
        for apply, description in edits(node):
            copy = site.body.copy()
            target = list(copy.walk(bfs=False))[i]
            replacement = apply(target)
            if replacement is not None:
                if target is copy:
                    copy = replacement
                else:
                    target.replace(replacement)
            yield Change(site.render(copy), description, site.rendered, tree=True)


def conjuncts(condition: exp.Expr) -> list[exp.Expr]:
    """The operands of an AND chain, parentheses around inner ANDs looked through."""
    if isinstance(condition, exp.And):
        return conjuncts(condition.this) + conjuncts(condition.expression)
    if isinstance(condition, exp.Paren) and isinstance(condition.this, exp.And):
        return conjuncts(condition.this)
    return [condition]
