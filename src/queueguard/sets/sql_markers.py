"""SQL files that hold both directions, told apart by their tool's markers: goose
(`-- +goose Up` / `-- +goose Down`, `StatementBegin`/`StatementEnd` around a statement that
holds semicolons, `-- +goose NO TRANSACTION`) and dbmate (`-- migrate:up` /
`-- migrate:down`). Only the up section is a revision's statements: a file applied whole
would run its down section right after its up one. A file whose markers cannot be read as
its tool reads them is refused naming the convention."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from queueguard.errors import UsageError
from queueguard.sets import split

_GOOSE = re.compile(r"^\s*--\s*\+goose\s+(?P<directive>.*?)\s*$")
_DBMATE = re.compile(r"^\s*--\s*migrate:(?P<direction>up|down)\b(?P<options>.*)$")
#: a revision-native fact: the file says its statements run outside a transaction
NO_TRANSACTION = "no_transaction"


@dataclass
class Read:
    """A file's up statements, and what its markers say about them."""

    statements: list[str]
    native: dict[str, Any] = field(default_factory=dict)


def read(text: str, source: str) -> Read:
    """The statements of one file: its up section when it carries goose's or dbmate's
    markers, the whole file otherwise."""
    lines = text.splitlines(keepends=True)
    if any(_GOOSE.match(line) for line in lines):
        return _goose(lines, source)
    if any(_DBMATE.match(line) for line in lines):
        return _dbmate(lines, source)
    return Read(split.split(text, source=source))


def up_text(text: str) -> str:
    """The file as its up section alone: every other line (the markers, the down section)
    blanked, so a line keeps its number (what `lint` gives squawk: a finding in the down
    section would name a statement the upgrade never runs)."""
    lines = text.splitlines(keepends=True)
    if any(_GOOSE.match(line) for line in lines):
        section = None
        kept = []
        for line in lines:
            marker = _GOOSE.match(line)
            if marker and marker["directive"] in ("Up", "Down"):
                section = marker["directive"]
            kept.append(line if section == "Up" and not marker else _blank(line))
        return "".join(kept)
    if any(_DBMATE.match(line) for line in lines):
        inside = False
        kept = []
        for line in lines:
            marker = _DBMATE.match(line)
            if marker:
                inside = marker["direction"] == "up"
            kept.append(line if inside and not marker else _blank(line))
        return "".join(kept)
    return text


def _blank(line: str) -> str:
    return "\n" if line.endswith("\n") else ""


def _refuse(source: str, tool: str, problem: str) -> UsageError:
    return UsageError(f"{source}: a {tool} migration ({problem}); not applied whole")


def _goose(lines: list[str], source: str) -> Read:
    """goose's up section: statements split as PostgreSQL reads them, a StatementBegin/End
    block as one statement (goose sends it whole)."""
    found = Read([])
    section: str | None = None
    chunk: list[str] = []
    block: list[str] | None = None
    for number, line in enumerate(lines, 1):
        marker = _GOOSE.match(line)
        directive = marker["directive"] if marker else None
        if directive is None:
            if section == "Up":
                (block if block is not None else chunk).append(line)
            continue
        if directive in ("Up", "Down"):
            if block is not None or (directive == "Up") != (section is None):
                raise _refuse(source, "goose", f"line {number}: `-- +goose {directive}` here")
            section = directive
            continue
        if directive == "NO TRANSACTION":  # goose reads it anywhere in the file
            found.native[NO_TRANSACTION] = True
        elif section != "Up":
            continue
        elif directive == "StatementBegin" and block is None:
            found.statements += split.split("".join(chunk), source=source)
            chunk, block = [], []
        elif directive == "StatementEnd" and block is not None:
            statement = "".join(block).strip().removesuffix(";").strip()
            found.statements += [statement] if statement else []
            block = None
        elif directive != "ENVSUB OFF":
            raise _refuse(source, "goose", f"line {number}: `-- +goose {directive}` unsupported")
    if section is None:
        raise _refuse(source, "goose", "no `-- +goose Up` section")
    if block is not None:
        raise _refuse(source, "goose", "a StatementBegin without its StatementEnd")
    found.statements += split.split("".join(chunk), source=source)
    return found


def _dbmate(lines: list[str], source: str) -> Read:
    """dbmate's up section: from `-- migrate:up` to `-- migrate:down`."""
    marks = [(i, m) for i, line in enumerate(lines) if (m := _DBMATE.match(line))]
    ups = [i for i, m in marks if m["direction"] == "up"]
    if len(ups) != 1:
        raise _refuse(source, "dbmate", f"{len(ups)} `-- migrate:up` markers, not one")
    start = ups[0]
    downs = [i for i, m in marks if m["direction"] == "down"]
    if any(i < start for i in downs):
        raise _refuse(source, "dbmate", "`-- migrate:down` before `-- migrate:up`")
    end = min(downs, default=len(lines))
    found = Read(split.split("".join(lines[start + 1 : end]), source=source))
    options = next(m["options"] for i, m in marks if i == start)
    if "transaction:false" in options:
        found.native[NO_TRANSACTION] = True
    return found
