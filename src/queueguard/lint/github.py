"""`lint --output github`: GitHub Actions workflow commands, one annotation per statement
(pure: lint's JSON document in, lines out).

    ::error file=schema/002.sql,line=1,col=1,title=rewrite squawk.changing-column-type::…

The runner shows each as an annotation on the pull request's diff at that line. Escaping is
the runner's (`toolkit/core`'s `command.ts`): in the message `%`, CR and LF become `%25`,
`%0D`, `%0A`; in a property value `:` and `,` too (`%3A`, `%2C`), since they separate
properties.
"""

from __future__ import annotations

from typing import Any

from queueguard.lint.annotations import Annotation, of_document


def escape_data(value: str) -> str:
    return value.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(value: str) -> str:
    return escape_data(value).replace(":", "%3A").replace(",", "%2C")


def command(a: Annotation) -> str:
    """One workflow command."""
    properties = {"file": a.file, "line": str(a.line), "col": str(a.column), "title": a.title}
    rendered = ",".join(f"{key}={escape_property(value)}" for key, value in properties.items())
    return f"::{a.level} {rendered}::{escape_data(a.message)}"


def render(doc: dict[str, Any], prefix: str = "", root: str | None = None) -> str:
    """Every statement's workflow command, one per line (empty: nothing to annotate)."""
    return "\n".join(command(a) for a in of_document(doc, prefix, root))
