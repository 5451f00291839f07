"""Operators on conditions: WHERE/ON conjuncts, comparisons, NOT, join kinds."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from sqlglot import exp

from queueguard.mutate.operators.base import (
    Apply,
    Change,
    Edit,
    Operator,
    conjuncts,
    tree_changes,
)
from queueguard.mutate.sites import RevisionSites, Site, one_line


# drop-conjunct ----------------------------------------------------------------------------
def _drop_where(node: exp.Expr) -> None:
    node.pop()


def _without(k: int, arg: str) -> Apply:
    def apply(node: exp.Expr) -> None:
        kept = [c for j, c in enumerate(conjuncts(node.args[arg])) if j != k]
        node.set(arg, exp.and_(*kept, copy=False))

    return apply


def _conjunct_edits(node: exp.Expr) -> Iterator[Edit]:
    if isinstance(node, exp.Where):
        parts = conjuncts(node.this)
        if len(parts) == 1:
            yield _drop_where, f"drop WHERE {one_line(node.this)}"
            return
        for k, part in enumerate(parts):
            yield _without(k, "this"), f"WHERE: drop the conjunct {one_line(part)}"
    elif isinstance(node, exp.Join) and node.args.get("on") is not None:
        condition = node.args["on"]
        if isinstance(condition, exp.Boolean) and condition.this is True:
            return
        parts = conjuncts(condition)
        table = one_line(node.this, 40)
        if len(parts) == 1:

            def on_true(join: exp.Expr) -> None:
                join.set("on", exp.true())

            yield on_true, f"JOIN {table}: ON TRUE instead of ON {one_line(condition)}"
            return
        for k, part in enumerate(parts):
            yield _without(k, "on"), f"JOIN {table}: drop the conjunct {one_line(part)}"


def drop_conjunct(site: Site, _: RevisionSites) -> Iterable[Change]:
    return tree_changes(site, _conjunct_edits)


# flip-comparison --------------------------------------------------------------------------
_FLIPS: dict[type[exp.Expr], tuple[type[exp.Expr], ...]] = {
    exp.EQ: (exp.NEQ,),
    exp.NEQ: (exp.EQ,),
    exp.LT: (exp.LTE, exp.GT),
    exp.LTE: (exp.LT, exp.GTE),
    exp.GT: (exp.GTE, exp.LT),
    exp.GTE: (exp.GT, exp.LTE),
}


def _is_assignment(node: exp.Expr) -> bool:
    """`SET a = b` of UPDATE / ON CONFLICT DO UPDATE is an EQ node in sqlglot's tree."""
    return node.arg_key == "expressions" and isinstance(node.parent, exp.Update | exp.OnConflict)


def _replace_with(klass: type[exp.Expr]) -> Apply:
    def apply(node: exp.Expr) -> exp.Expr:
        return klass(this=node.this, expression=node.expression)

    return apply


def _comparison_edits(node: exp.Expr) -> Iterator[Edit]:
    if type(node) in _FLIPS and not _is_assignment(node):
        for klass in _FLIPS[type(node)]:
            after = klass(this=node.this.copy(), expression=node.expression.copy())
            yield _replace_with(klass), f"{one_line(node)} → {one_line(after)}"
    elif isinstance(node, exp.Is) and isinstance(node.expression, exp.Null):

        def flip(target: exp.Expr) -> None:
            target.set("negate", not target.args.get("negate"))

        after = node.copy()
        flip(after)
        yield flip, f"{one_line(node)} → {one_line(after)}"


def flip_comparison(site: Site, _: RevisionSites) -> Iterable[Change]:
    return tree_changes(site, _comparison_edits)


# negate-predicate -------------------------------------------------------------------------
_PREDICATES = (exp.Exists, exp.In, exp.Like, exp.ILike, exp.Between, exp.SimilarTo)


def _negation_edits(node: exp.Expr) -> Iterator[Edit]:
    if isinstance(node, exp.Not):

        def unwrap(target: exp.Expr) -> exp.Expr:
            inner: exp.Expr = target.this
            return inner

        yield unwrap, f"{one_line(node)} → {one_line(node.this)}"
    elif isinstance(node, _PREDICATES) and not isinstance(node.parent, exp.Not):

        def wrap(target: exp.Expr) -> exp.Expr:
            return exp.Not(this=target.copy())

        yield wrap, f"{one_line(node)} → NOT {one_line(node)}"


def negate_predicate(site: Site, _: RevisionSites) -> Iterable[Change]:
    return tree_changes(site, _negation_edits)


# join-kind --------------------------------------------------------------------------------
def _join_edits(node: exp.Expr) -> Iterator[Edit]:
    if not isinstance(node, exp.Join) or node.args.get("on") is None:
        return
    side = str(node.args.get("side") or "").upper()
    table = one_line(node.this, 40)
    if side == "LEFT":

        def inner(join: exp.Expr) -> None:
            join.set("side", None)
            join.set("kind", None)

        yield inner, f"LEFT JOIN {table} → JOIN {table}"
    elif not side and str(node.args.get("kind") or "").upper() in ("", "INNER"):

        def left(join: exp.Expr) -> None:
            join.set("side", "LEFT")
            join.set("kind", None)

        yield left, f"JOIN {table} → LEFT JOIN {table}"


def join_kind(site: Site, _: RevisionSites) -> Iterable[Change]:
    return tree_changes(site, _join_edits)


OPERATORS = (
    Operator(
        "drop-conjunct",
        "drop one AND operand of a WHERE or JOIN … ON (a single condition: the whole WHERE, "
        "or ON TRUE)",
        drop_conjunct,
    ),
    Operator(
        "flip-comparison",
        "= ↔ <>, < → <= or >, <= → < or >=, > → >= or <, >= → > or <=, IS NULL ↔ IS NOT NULL",
        flip_comparison,
    ),
    Operator(
        "negate-predicate",
        "NOT p → p; EXISTS, IN, LIKE, BETWEEN → NOT …",
        negate_predicate,
    ),
    Operator("join-kind", "LEFT JOIN ↔ JOIN (joins with an ON condition)", join_kind),
)
