"""The report: one scenario's row of the table and its details in docs/reliability.md."""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.common.commands import ROOT

DOC = ROOT / "docs" / "reliability.md"


def say(message: str) -> None:
    print(message, flush=True)


TABLE_START, TABLE_END = "<!-- chaos-table:start -->", "<!-- chaos-table:end -->"
COLUMNS = (
    "#",
    "Scenario",
    "Scale",
    "Faults injected",
    "Tasks produced",
    "Lost",
    "Duplicated-and-rejected",
    "Worst stall",
    "CI test (small scale)",
)


_BLOCK = re.compile(
    r"<!-- chaos-details:(\d+):start -->\n.*?<!-- chaos-details:\1:end -->\n*", re.S
)


def record(number: int, row: dict[str, Any], details: Sequence[str], doc: Path = DOC) -> None:
    """Replace scenario `number`'s table row and its generated block in docs/reliability.md
    (blocks are kept in scenario order at the end of the page)."""
    text = doc.read_text(encoding="utf-8")
    head, rest = text.split(TABLE_START, 1)
    table, tail = rest.split(TABLE_END, 1)
    rows: dict[int, str] = {}
    for line in table.strip().splitlines()[2:]:
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells and cells[0].isdigit():
            rows[int(cells[0])] = line
    values = [str(number), *(str(row[c]) for c in COLUMNS[1:])]
    rows[number] = "| " + " | ".join(v.replace("|", "\\|") for v in values) + " |"
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "|".join("---" for _ in COLUMNS) + "|"]
    lines += [rows[n] for n in sorted(rows)]
    text = head + TABLE_START + "\n" + "\n".join(lines) + "\n" + TABLE_END + tail
    blocks = {int(m.group(1)): m.group(0).rstrip("\n") for m in _BLOCK.finditer(text)}
    text = _BLOCK.sub("", text).rstrip("\n")
    stamp = f"_Generated {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {os.cpu_count()} CPUs._"
    blocks[number] = "\n".join(
        [
            f"<!-- chaos-details:{number}:start -->",
            f"### {number}. {row['Scenario']}",
            "",
            stamp,
            "",
            *details,
            f"<!-- chaos-details:{number}:end -->",
        ]
    )
    text += "\n\n" + "\n\n".join(blocks[n] for n in sorted(blocks)) + "\n"
    doc.write_text(text, encoding="utf-8")


def seconds(value: float) -> str:
    return f"{value * 1000:.0f} ms" if value < 1 else f"{value:.2f} s"
