"""Generated `## Section`s of a Markdown page (docs/benchmarks.md), one per benchmark."""

from __future__ import annotations

from pathlib import Path


def replace_section(doc: Path, section: str, *, title: str = "# Benchmarks") -> None:
    """Put `section` (starting with its `## Heading` line) in place of the section of the same
    heading in `doc`, or append it; the other sections stay as they are, one blank line apart.
    A missing page is created with `title`."""
    heading = section.split("\n", 1)[0]
    text = doc.read_text(encoding="utf-8") if doc.exists() else title + "\n"
    start = text.find(f"\n{heading}\n")
    if start >= 0:
        end = text.find("\n## ", start + len(heading) + 2)
        rest = text[end + 1 :] if end >= 0 else ""
        text = text[: start + 1] + section.rstrip("\n") + "\n" + ("\n" + rest if rest else "")
    else:
        text = text.rstrip("\n") + "\n\n" + section
    doc.write_text(text.rstrip("\n") + "\n", encoding="utf-8")
