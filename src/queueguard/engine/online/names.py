"""Names as the catalog spells them and as SQL must write them (pure)."""

from __future__ import annotations

import pglast
from pglast import keywords


def quote(name: str) -> str:
    """An identifier as SQL writes it: bare where PostgreSQL would fold it to itself."""
    bare = name.isidentifier() and name == name.lower() and name.isascii()
    if bare and name.upper() not in _RESERVED:
        return name
    return '"' + name.replace('"', '""') + '"'


def unqualified(regclass: str) -> str:
    """The relation name of a regclass text (`s."T"` → `T`, `t_pkey` → `t_pkey`)."""
    node = pglast.parse_sql(f"SELECT * FROM {regclass}")[0].stmt
    assert node is not None
    return str(node.fromClause[0].relname)  # type: ignore[attr-defined]


def bounded(name: str) -> str:
    """A name cut to PostgreSQL's 63 bytes, as the server would cut it."""
    data = name.encode()
    while len(data) > 63:
        name = name[:-1]
        data = name.encode()
    return name


_RESERVED = frozenset(
    w.upper() for w in keywords.RESERVED_KEYWORDS | keywords.TYPE_FUNC_NAME_KEYWORDS
)
