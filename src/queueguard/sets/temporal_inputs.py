"""What temporal-sql-tool accepts as input, rule for rule: a manifest.json decoded the way
Go's encoding/json fills the tool's struct, and the prefixes a statement must start with
(validateCQLStmts). Apart from `sets.temporal`, which reads the folders in version order and
keeps the bookkeeping tables, because these rules are the Go tool's own and are checked
without a file system or a database.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from queueguard.errors import UsageError

#: updatetask.go's whitelistedCQLPrefixes, compared case-sensitively with strings.HasPrefix
ALLOWED_PREFIXES = ("CREATE", "ALTER", "INSERT", "DROP", "DO")


@dataclass(frozen=True)
class Manifest:
    """One manifest.json as the tool decodes it, versions already without their `v`."""

    curr_version: str
    min_compatible_version: str
    description: str
    files: tuple[str, ...]
    allow_no_files: bool
    md5: str


_FIELDS = {
    "currversion": ("CurrVersion", str),
    "mincompatibleversion": ("MinCompatibleVersion", str),
    "description": ("Description", str),
    "schemaupdatecqlfiles": ("SchemaUpdateCqlFiles", list),
    "allownocqlfiles": ("AllowNoCqlFiles", bool),
}


def decode(raw: bytes, where: str) -> dict[str, Any]:
    """The manifest's fields as Go's encoding/json fills the struct: keys match the field
    names case-insensitively, unknown keys are ignored, null leaves the zero value, any other
    type mismatch is an error."""
    try:
        document = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UsageError(f"{where}: not valid JSON ({exc})") from None
    if document is None:
        document = {}
    if not isinstance(document, dict):
        raise UsageError(f"{where}: expected a JSON object, got {type(document).__name__}")
    fields: dict[str, Any] = {}
    for key, value in document.items():
        known = _FIELDS.get(key.lower())
        if known is None or value is None:
            continue
        name, kind = known
        strings = isinstance(value, list) and all(isinstance(item, str) for item in value)
        if not isinstance(value, kind) or (kind is list and not strings):
            want = "a list of strings" if kind is list else kind.__name__
            raise UsageError(f"{where}: {name} must be {want}, got {value!r}")
        fields[name] = value
    return fields


def _without_line_comments(statement: str) -> str:
    """The statement from its first token on, leading `--` comments skipped (the tool's
    splitter removes them; it leaves `/* */` comments in place)."""
    body = statement.lstrip()
    while body.startswith("--"):
        _, _, body = body.partition("\n")
        body = body.lstrip()
    return body


def check_statement(statement: str, where: str) -> None:
    """validateCQLStmts: the tool refuses a statement not starting with one of its prefixes
    (case-sensitive): a leading `/* */` comment or a lower-case keyword is refused here too."""
    body = _without_line_comments(statement)
    if not body.startswith(ALLOWED_PREFIXES):
        first = body.split(None, 1)[0] if body.split() else ""
        raise UsageError(
            f"{where}: temporal-sql-tool refuses a statement starting with {first!r} "
            f"(it accepts only {', '.join(ALLOWED_PREFIXES)}, upper case)"
        )
