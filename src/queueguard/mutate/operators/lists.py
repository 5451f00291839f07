"""Operators on lists: whole statements, SELECT and SET items, ORDER BY directions."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from sqlglot import exp

from queueguard.mutate.operators.base import Apply, Change, Edit, Operator, tree_changes
from queueguard.mutate.sites import RevisionSites, Site, one_line


# drop-statement ---------------------------------------------------------------------------
def _statement_span(site: Site) -> tuple[int, int]:
    """The statement with its `;` and the rest of that line when nothing else is on it."""
    text = site.file.text
    end = site.statement.end
    after = end
    while after < len(text) and text[after] in " \t":
        after += 1
    if after < len(text) and text[after] == ";":
        end = after + 1
        rest = end
        while rest < len(text) and text[rest] in " \t":
            rest += 1
        if rest < len(text) and text[rest] == "\n":
            end = rest + 1
    return site.statement.start, end


def drop_statement(site: Site, _: RevisionSites) -> Iterable[Change]:
    first = " ".join(site.text.split())
    first = first if len(first) <= 60 else first[:59] + "…"
    yield Change("", f"drop the statement {first}", site.text, _statement_span(site))


# swap-items -------------------------------------------------------------------------------
def _value(item: exp.Expr) -> exp.Expr:
    return item.this if isinstance(item, exp.Alias) else item


def _named(value: exp.Expr, old: exp.Expr, names_matter: bool) -> exp.Expr:
    """`value` under the output name `old` had, so only the values change places."""
    if isinstance(old, exp.Alias):
        return exp.Alias(this=value, alias=old.args["alias"].copy())
    if names_matter and isinstance(old, exp.Column) and isinstance(old.this, exp.Identifier):
        return exp.Alias(this=value, alias=old.this.copy())
    return value


def _swap_select(i: int, names_matter: bool) -> Apply:
    def apply(select: exp.Expr) -> None:
        items = list(select.expressions)
        a, b = items[i], items[i + 1]
        items[i] = _named(_value(b).copy(), a, names_matter)
        items[i + 1] = _named(_value(a).copy(), b, names_matter)
        select.set("expressions", items)

    return apply


def _swap_set(i: int) -> Apply:
    def apply(update: exp.Expr) -> None:
        items = list(update.expressions)
        a, b = items[i], items[i + 1]
        items[i] = exp.EQ(this=a.this.copy(), expression=b.expression.copy())
        items[i + 1] = exp.EQ(this=b.this.copy(), expression=a.expression.copy())
        update.set("expressions", items)

    return apply


def _item_edits(node: exp.Expr) -> Iterator[Edit]:
    if isinstance(node, exp.Select) and not isinstance(node.parent, exp.Exists):
        names_matter = not isinstance(node.parent, exp.Insert)
        items = node.expressions
        for i in range(len(items) - 1):
            a, b = _value(items[i]), _value(items[i + 1])
            if isinstance(a, exp.Star) or isinstance(b, exp.Star) or a == b:
                continue
            description = f"SELECT items {i + 1} and {i + 2}: {one_line(a, 40)} ↔ {one_line(b, 40)}"
            yield _swap_select(i, names_matter), description
    elif isinstance(node, exp.Update):
        items = node.expressions
        for i in range(len(items) - 1):
            a, b = items[i], items[i + 1]
            if not (isinstance(a, exp.EQ) and isinstance(b, exp.EQ)):
                continue
            if a.expression == b.expression:
                continue
            description = (
                f"SET {one_line(a.this)} and {one_line(b.this)} swap values: "
                f"{one_line(a.expression, 40)} ↔ {one_line(b.expression, 40)}"
            )
            yield _swap_set(i), description


def swap_items(site: Site, _: RevisionSites) -> Iterable[Change]:
    return tree_changes(site, _item_edits)


# swap-order -------------------------------------------------------------------------------
def _flip(ordered: exp.Expr) -> None:
    desc = bool(ordered.args.get("desc"))
    nulls_first = bool(ordered.args.get("nulls_first"))
    ordered.set("desc", not desc)
    # PostgreSQL sorts NULLs as the largest value: the default placement follows the direction.
    ordered.set("nulls_first", (not desc) if nulls_first == desc else nulls_first)


def _order_edits(node: exp.Expr) -> Iterator[Edit]:
    if isinstance(node, exp.Ordered) and isinstance(node.parent, exp.Order):
        after = node.copy()
        _flip(after)
        where = "window ORDER BY" if node.find_ancestor(exp.Window) else "ORDER BY"
        yield _flip, f"{where} {one_line(node)} → {one_line(after)}"


def swap_order(site: Site, _: RevisionSites) -> Iterable[Change]:
    return tree_changes(site, _order_edits)


OPERATORS = (
    Operator(
        "drop-statement",
        "remove a whole statement (and its semicolon)",
        drop_statement,
    ),
    Operator(
        "swap-items",
        "swap two adjacent values of a SELECT list (output names kept) or of an UPDATE SET list",
        swap_items,
    ),
    Operator(
        "swap-order",
        "ASC ↔ DESC in ORDER BY, including a window's",
        swap_order,
    ),
)
