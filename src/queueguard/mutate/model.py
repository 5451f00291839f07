"""A mutant: one small change to one statement of one step file of a revision."""

from __future__ import annotations

import difflib
import hashlib
import re
from dataclasses import dataclass
from typing import Any

_SPACE = re.compile(r"\s+")


def normalise(sql: str) -> str:
    """Whitespace collapsed: what a mutant's identity depends on (not its layout)."""
    return _SPACE.sub(" ", sql).strip()


def mutant_id(operator: str, file: str, original: str, mutated: str) -> str:
    """12 hex digits, stable across runs, reformatting and unrelated edits of the file."""
    key = "\n".join((operator, file, normalise(original), normalise(mutated)))
    return hashlib.sha256(key.encode()).hexdigest()[:12]


@dataclass(frozen=True)
class Mutant:
    """One mutant of a revision (`file` is relative to the migration set: `sql/004/…`)."""

    operator: str
    file: str
    #: index of the mutated statement in the file (0-based, `SqlFile.statements` order)
    statement: int
    #: 1-based line of the statement in the original file
    line: int
    #: the statement as written in the file
    original: str
    #: the statement as the mutant writes it ('' when the statement is dropped)
    mutated: str
    #: the whole mutated file
    text: str
    #: one line: what changed
    description: str
    #: the statement as the mutant renders it unchanged (sqlglot's rendering for mutants
    #: made on the syntax tree, the original text otherwise): the left side of `diff`
    before: str

    @property
    def id(self) -> str:
        return mutant_id(self.operator, self.file, self.original, self.mutated)

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"

    def diff(self) -> str:
        """A unified diff of the statement (rendered unchanged → mutated)."""
        lines = difflib.unified_diff(
            self.before.splitlines(),
            self.mutated.splitlines(),
            f"a/{self.file}:{self.line} (statement {self.statement})",
            f"b/{self.file}:{self.line} ({self.operator})",
            lineterm="",
        )
        return "\n".join(lines)

    def as_json(self, *, with_text: bool = False) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "id": self.id,
            "operator": self.operator,
            "file": self.file,
            "statement": self.statement,
            "line": self.line,
            "description": self.description,
            "original": self.original,
            "mutated": self.mutated,
            "diff": self.diff(),
        }
        if with_text:
            doc["text"] = self.text
        return doc
