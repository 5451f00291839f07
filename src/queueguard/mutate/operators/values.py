"""Operators on values: ±1, literal defaults and fallbacks, jsonb keys, max/min."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator

from sqlglot import exp

from queueguard.mutate.operators.base import Apply, Change, Edit, Operator, tree_changes
from queueguard.mutate.sites import RevisionSites, Site, context, in_exists_list, one_line

#: The suffix a mutated jsonb key gets (`runId` → `runId_mutant`).
KEY_SUFFIX = "_mutant"


def _position(root: exp.Expr, node: exp.Expr) -> int:
    """Where `node` (by identity, not by equality) is in `root`'s depth-first walk."""
    return next(i for i, n in enumerate(root.walk(bfs=False)) if n is node)


def _replace(node: exp.Expr) -> Apply:
    def apply(_: exp.Expr) -> exp.Expr:
        return node.copy()

    return apply


# off-by-one -------------------------------------------------------------------------------
def _is_int(node: exp.Expr) -> bool:
    return isinstance(node, exp.Literal) and node.is_int


def _positional(node: exp.Expr) -> bool:
    """`ORDER BY 1` / `GROUP BY 2` name a column by position: not a value."""
    return isinstance(node.parent, exp.Ordered | exp.Group)


def _plain_operand(node: exp.Expr) -> bool:
    return not (
        _is_int(node)
        or (isinstance(node, exp.Literal) and node.is_string)
        or isinstance(node, exp.Interval)
    )


def _operand(node: exp.Expr) -> bool:
    """Whether `node` is an operand of an operator (so `node + 1` needs parentheses)."""
    parent = node.parent
    if isinstance(parent, exp.EQ) and isinstance(parent.parent, exp.Update | exp.OnConflict):
        return False  # `SET a = …` assigns; it is no operator
    return isinstance(parent, exp.Binary) or (
        isinstance(parent, exp.Unary) and not isinstance(parent, exp.Paren)
    )


def _off_by_one_edits(node: exp.Expr) -> Iterator[Edit]:
    if _is_int(node) and not _positional(node) and not in_exists_list(node):
        value = int(node.name)
        for new in (value + 1, value - 1):
            where = (
                one_line(node.parent, 40)
                if isinstance(node.parent, exp.Binary | exp.Func)
                else context(node)
            )
            yield _replace(exp.Literal.number(new)), f"{value} → {new} in {where}"
    elif (
        isinstance(node, exp.Add | exp.Sub)
        and _plain_operand(node.this)
        and _plain_operand(node.expression)
    ):
        for klass, sign in ((exp.Add, "+"), (exp.Sub, "-")):
            after: exp.Expr = klass(this=node.copy(), expression=exp.Literal.number(1))
            if _operand(node):
                after = exp.Paren(this=after)
            where = context(node)
            yield _replace(after), f"{one_line(node, 50)} → … {sign} 1 in {where}"


def off_by_one(site: Site, _: RevisionSites) -> Iterable[Change]:
    return tree_changes(site, _off_by_one_edits)


# replace-default --------------------------------------------------------------------------
def _alternatives(value: exp.Expr) -> list[exp.Expr]:
    """NULL, and one other value of the same type (strings and booleans; integers are
    off-by-one's)."""
    found: list[exp.Expr] = [exp.null()]
    if isinstance(value, exp.Boolean):
        found.append(exp.Boolean(this=not value.this))
    elif isinstance(value, exp.Literal) and value.is_string:
        text = value.this
        try:
            parsed = json.loads(text)
        except ValueError:
            parsed = None
        if isinstance(parsed, dict) and parsed:
            found.append(exp.Literal.string("{}"))
        elif isinstance(parsed, list) and parsed:
            found.append(exp.Literal.string("[]"))
        else:
            found.append(exp.Literal.string("" if text else "mutant"))
    return found


def _fallback(node: exp.Expr) -> tuple[exp.Expr, str] | None:
    """The literal default or fallback `node` holds, and what to call it."""
    if isinstance(node, exp.DefaultColumnConstraint):
        return node.this, "DEFAULT"
    if isinstance(node, exp.AlterColumn) and node.args.get("default") is not None:
        return node.args["default"], "SET DEFAULT"
    if isinstance(node, exp.Coalesce) and node.expressions:
        return node.expressions[-1], f"{one_line(node, 40)} fallback"
    return None


def _default_edits(node: exp.Expr) -> Iterator[Edit]:
    found = _fallback(node)
    if found is None:
        return
    value, what = found
    if not isinstance(value, exp.Literal | exp.Boolean):
        return
    index = _position(node, value)
    for new in _alternatives(value):

        def apply(target: exp.Expr, new: exp.Expr = new) -> None:
            list(target.walk(bfs=False))[index].replace(new.copy())

        yield apply, f"{what} {one_line(value, 40)} → {one_line(new)}"


def replace_default(site: Site, _: RevisionSites) -> Iterable[Change]:
    return tree_changes(site, _default_edits)


# jsonb-key --------------------------------------------------------------------------------
#: functions whose second argument is a text[] path: `jsonb_set(t, '{a,b}', …)`
_PATH_FUNCTIONS = frozenset({"jsonb_set", "jsonb_set_lax", "jsonb_insert"})
#: functions whose arguments after the first are keys
_KEY_FUNCTIONS = frozenset({"jsonb_extract_path", "jsonb_extract_path_text"})
_OBJECT_FUNCTIONS = frozenset({"jsonb_build_object", "json_build_object"})
_PATH = re.compile(r"\{([A-Za-z_][\w]*(?:,[A-Za-z_][\w]*)*)\}")


def _function(node: exp.Expr) -> str:
    return node.name.lower() if isinstance(node, exp.Anonymous) else ""


def _key_literals(node: exp.Expr) -> list[tuple[exp.Literal, bool]]:
    """(string literal, is a '{a,b}' path) holding jsonb keys among `node`'s arguments."""
    name = _function(node)
    args = list(node.expressions) if isinstance(node, exp.Anonymous) else []
    if name in _PATH_FUNCTIONS and len(args) > 1:
        picked = [(args[1], True)]
    elif name in _KEY_FUNCTIONS:
        picked = [(a, False) for a in args[1:]]
    elif name in _OBJECT_FUNCTIONS:
        picked = [(a, False) for a in args[0::2]]
    elif isinstance(node, exp.JSONBExtract | exp.JSONBExtractScalar):
        picked = [(node.expression, True)]
    else:
        picked = []
    return [(a, path) for a, path in picked if isinstance(a, exp.Literal) and a.is_string]


def _jsonb_key_edits(node: exp.Expr) -> Iterator[Edit]:
    if isinstance(node, exp.JSONPathKey) and isinstance(node.this, str):
        key = node.this

        def rename(target: exp.Expr) -> None:
            target.set("this", key + KEY_SUFFIX)

        yield rename, f"jsonb key '{key}' → '{key}{KEY_SUFFIX}' in {one_line(_operator(node))}"
        return
    for literal, is_path in _key_literals(node):
        index = _position(node, literal)
        if is_path:
            match = _PATH.fullmatch(literal.this)
            keys = match.group(1).split(",") if match else []
        else:
            keys = [literal.this]
        for k, key in enumerate(keys):
            mutated = [*keys[:k], key + KEY_SUFFIX, *keys[k + 1 :]]
            text = "{" + ",".join(mutated) + "}" if is_path else mutated[0]

            def apply(target: exp.Expr, index: int = index, text: str = text) -> None:
                list(target.walk(bfs=False))[index].replace(exp.Literal.string(text))

            yield apply, f"jsonb key '{key}' → '{key}{KEY_SUFFIX}' in {one_line(node)}"


def _operator(node: exp.Expr) -> exp.Expr:
    """The `->`/`->>` expression a JSONPath key belongs to."""
    while node.parent is not None and isinstance(node, exp.JSONPathPart | exp.JSONPath):
        node = node.parent
    return node


def jsonb_key(site: Site, _: RevisionSites) -> Iterable[Change]:
    return tree_changes(site, _jsonb_key_edits)


# swap-extremum ----------------------------------------------------------------------------
_OPPOSITES: dict[type[exp.Expr], type[exp.Expr]] = {
    exp.Max: exp.Min,
    exp.Min: exp.Max,
    exp.Greatest: exp.Least,
    exp.Least: exp.Greatest,
}


def _extremum_edits(node: exp.Expr) -> Iterator[Edit]:
    klass = _OPPOSITES.get(type(node))
    if klass is None:
        return

    def swap(target: exp.Expr) -> exp.Expr:
        return klass(**target.args)

    after = klass(**node.copy().args)
    yield swap, f"{one_line(node, 50)} → {one_line(after, 50)} in {context(node)}"


def swap_extremum(site: Site, _: RevisionSites) -> Iterable[Change]:
    return tree_changes(site, _extremum_edits)


OPERATORS = (
    Operator(
        "off-by-one",
        "an integer constant n → n + 1 and n - 1; an arithmetic expression e → e + 1 and e - 1",
        off_by_one,
    ),
    Operator(
        "replace-default",
        "a literal DEFAULT or coalesce(…, x) fallback → NULL, and a string → '' ('{}' for a "
        "JSON object), a boolean → its negation",
        replace_default,
    ),
    Operator(
        "jsonb-key",
        f"a jsonb key → key{KEY_SUFFIX}: in -> / ->> paths, '{{a,b}}' path arrays "
        "(jsonb_set, #>), jsonb_build_object keys",
        jsonb_key,
    ),
    Operator("swap-extremum", "max ↔ min, greatest ↔ least", swap_extremum),
)
