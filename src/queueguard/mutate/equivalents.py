"""Equivalent mutants: the reviewed list of mutants that cannot change behaviour.

A TOML file (default: `mutation-equivalents.toml` in the migration set) holds one
`[[equivalent]]` table per mutant, identified by its operator, file and id (the 12 hex digits
`queueguard mutate --list` prints; a hash of the operator, the file, and the original and
mutated statement with whitespace collapsed), with a one-line reason:

    [[equivalent]]
    id = "ea6d7ea11e11"
    operator = "drop-statement"
    file = "sql/004/01_plan.sql"
    change = "drop the statement ALTER TABLE directive ADD PRIMARY KEY (run_id)"
    reason = "executions.run_id is executions' primary key, so directive.run_id is unique …"

`change` is for the reader and is not matched. An entry without a reason (or with an empty
one), an unknown key, or an id listed twice is an error. An entry of the mutated revision
that matches no generated mutant is *stale* (its statement changed): reported, so it is
reviewed again or removed.
"""

from __future__ import annotations

import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from queueguard.mutate.errors import EquivalentsError
from queueguard.mutate.model import Mutant

FILE = "mutation-equivalents.toml"
_KEYS = {"id", "operator", "file", "change", "reason"}
_REQUIRED = ("id", "operator", "file", "reason")


@dataclass(frozen=True)
class Equivalent:
    id: str
    operator: str
    file: str
    reason: str
    change: str = ""

    def matches(self, mutant: Mutant) -> bool:
        return (self.id, self.operator, self.file) == (mutant.id, mutant.operator, mutant.file)

    def as_json(self) -> dict[str, str]:
        return dict(self.__dict__)


def default_path(migrations_root: Path) -> Path:
    return migrations_root / FILE


def load(path: Path) -> tuple[Equivalent, ...]:
    """The entries of the file at `path` (none when it does not exist)."""
    if not path.exists():
        return ()
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise EquivalentsError(f"{path}: cannot read the equivalent mutants: {exc}") from None
    unknown_top = sorted(set(data) - {"equivalent"})
    if unknown_top:
        raise EquivalentsError(f"{path}: unknown key(s) {', '.join(unknown_top)}")
    tables = data.get("equivalent", [])
    if not isinstance(tables, list):
        raise EquivalentsError(f"{path}: `equivalent` must be an array of tables")
    entries: list[Equivalent] = []
    for n, table in enumerate(tables, start=1):
        where = f"{path}: equivalent #{n}"
        if not isinstance(table, dict):
            raise EquivalentsError(f"{where}: not a table")
        unknown = sorted(set(table) - _KEYS)
        if unknown:
            raise EquivalentsError(f"{where}: unknown key(s) {', '.join(unknown)}")
        for key in _REQUIRED:
            value = table.get(key)
            if not isinstance(value, str) or not value.strip():
                what = "a reason" if key == "reason" else f"`{key}`"
                raise EquivalentsError(
                    f"{where} ({table.get('id', '?')}): has no {what}; every equivalent "
                    "mutant needs a one-line reason why it cannot change behaviour"
                )
        if "\n" in table["reason"].strip():
            raise EquivalentsError(f"{where} ({table['id']}): the reason must be one line")
        entries.append(
            Equivalent(
                table["id"].strip(),
                table["operator"].strip(),
                table["file"].strip(),
                " ".join(table["reason"].split()),
                str(table.get("change", "")),
            )
        )
    ids = [e.id for e in entries]
    twice = sorted({i for i in ids if ids.count(i) > 1})
    if twice:
        raise EquivalentsError(f"{path}: listed more than once: {', '.join(twice)}")
    return tuple(entries)


@dataclass(frozen=True)
class Matched:
    """The equivalence file against one revision's mutants."""

    #: mutant id → its entry
    equivalent: dict[str, Equivalent]
    #: entries of the revision that match no generated mutant
    stale: tuple[Equivalent, ...]


def match(entries: Sequence[Equivalent], mutants: Sequence[Mutant], revision: str) -> Matched:
    found: dict[str, Equivalent] = {}
    for entry in entries:
        for mutant in mutants:
            if entry.matches(mutant):
                found[mutant.id] = entry
    prefix = f"sql/{revision}/"
    stale = tuple(e for e in entries if e.file.startswith(prefix) and e not in found.values())
    return Matched(found, stale)


def stub(mutant: Mutant) -> str:
    """A TOML entry for `mutant`, to paste into the file once its reason is written."""
    change = mutant.description.replace("\\", "\\\\").replace('"', '\\"')
    return (
        "[[equivalent]]\n"
        f'id = "{mutant.id}"\n'
        f'operator = "{mutant.operator}"\n'
        f'file = "{mutant.file}"\n'
        f'change = "{change}"\n'
        'reason = ""  # one line: why no database state can tell it from the original\n'
    )
