"""What PostgreSQL's jsonb (and text) can hold: the one rule both stores, the snapshot
validator and the queue keys apply, so a value the memory store accepts can always be
written to PostgreSQL and a snapshot always imports into either store.

jsonb refuses text with NUL (U+0000) or that is not UTF-8 (a lone surrogate), and numbers
that are not finite (NaN, Infinity).
"""

from __future__ import annotations

import math
from typing import Any


def text_problem(text: str) -> str | None:
    """Why `text` cannot be stored in PostgreSQL text/jsonb, or None."""
    if "\x00" in text:
        return "contains a NUL character, which PostgreSQL cannot store"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "is not valid UTF-8 (a lone surrogate?), which PostgreSQL cannot store"
    return None


def first_problem(value: Any, root: str = "$") -> tuple[str, str] | None:
    """(where, why) of the first part of a JSON value jsonb cannot hold, or None.

    Iterative, so a deeply nested document cannot exhaust the stack.
    """
    stack: list[tuple[Any, str]] = [(value, root)]
    while stack:
        node, where = stack.pop()
        if isinstance(node, dict):
            for key, item in node.items():
                if isinstance(key, str) and (why := text_problem(key)):
                    return where, f"a key {why}"
                stack.append((item, f"{where}.{key}"))
        elif isinstance(node, list | tuple):
            stack.extend((item, f"{where}[{i}]") for i, item in enumerate(node))
        elif isinstance(node, str):
            if why := text_problem(node):
                return where, f"text {why}"
        elif isinstance(node, float) and not math.isfinite(node):
            return where, f"{node} is not a JSON number"
    return None
