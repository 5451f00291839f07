"""The mutation operators, in their stable order (each has a stable name).

An operator turns one statement (a `Site`) of a revision into zero or more `Change`s; it is
pure code over sqlglot's tree or the statement's text, and needs no database.
"""

from __future__ import annotations

from queueguard.errors import UsageError
from queueguard.mutate.operators import conditions, lists, locks, values
from queueguard.mutate.operators.base import Change, Operator

__all__ = ["OPERATORS", "Change", "Operator", "select"]

OPERATORS: tuple[Operator, ...] = (
    lists.OPERATORS[0],  # drop-statement
    *conditions.OPERATORS,  # drop-conjunct, flip-comparison, negate-predicate, join-kind
    *values.OPERATORS,  # off-by-one, replace-default, jsonb-key, swap-extremum
    *lists.OPERATORS[1:],  # swap-items, swap-order
    *locks.OPERATORS,  # widen-lock, add-lock
)


def select(names: list[str] | None) -> tuple[Operator, ...]:
    """The operators named (all by default), in their stable order; UsageError for an
    unknown name."""
    if not names:
        return OPERATORS
    known = {op.name for op in OPERATORS}
    unknown = sorted(set(names) - known)
    if unknown:
        have = ", ".join(sorted(known))
        raise UsageError(f"unknown operator {', '.join(unknown)} (have: {have})")
    return tuple(op for op in OPERATORS if op.name in names)
