"""The ranking of findings on one statement, and what each costs in lock-mode terms (pure).

Every squawk rule is put in a tier, worst first:

    rewrite   ACCESS EXCLUSIVE while every row of the table is rewritten (and every index
              rebuilt): reads and writes wait for a time that grows with the table
    build     a blocking lock held while an index is built (SHARE: writes wait; ACCESS
              EXCLUSIVE for a UNIQUE or PRIMARY KEY constraint: reads wait too)
    scan      a lock held while every row is checked (SET NOT NULL, a CHECK or FOREIGN KEY
              without NOT VALID)
    fails     the statement fails as written (NOT NULL without a default on a table with rows,
              a BEGIN left open)
    breaks    a brief, catalog-only ACCESS EXCLUSIVE, but clients still using the old shape
              break (renames, drops)
    lock      a brief ACCESS EXCLUSIVE where a non-blocking form exists (DROP INDEX without
              CONCURRENTLY, DETACH PARTITION without CONCURRENTLY)
    other     a squawk rule this table does not know: squawk's message, ranked above style
    advisory  no lock cost of its own: style (prefer-bigint, prefer-text-field,
              prefer-robust-stmts, …) and the timeout settings (require-lock-timeout, …)
    note      observed by `plan` to be catalog-only or to block no reader or writer

A statement keeps the finding of the highest tier; within a tier, the rule listed first in
`RULES` (the more specific one: adding-foreign-key-constraint before
constraint-missing-not-valid), then the earliest in the file. With an observation (`plan`'s
trace) the tier and the cost are the observed ones instead of squawk's guess.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from enum import IntEnum

from queueguard.engine.locks import mode_of
from queueguard.engine.plan.bill import Line
from queueguard.lint.model import Finding


class Tier(IntEnum):
    NOTE = 0
    ADVISORY = 1
    OTHER = 2
    LOCK = 3
    BREAKS = 4
    FAILS = 5
    SCAN = 6
    BUILD = 7
    REWRITE = 8

    @property
    def label(self) -> str:
        return self.name.lower()


_STYLE = "style: no lock cost of its own"
_TIMEOUT = (
    "no lock cost of its own, but without it a lock request that waits queues every later "
    "query on {table} behind it"
)
_BREAKS = "ACCESS EXCLUSIVE on {table}, brief (catalog only), but clients still using it break"

#: squawk rule -> (tier, what it costs); `{table}` and `{ref}` are read from the statement.
#: Within a tier, the order here breaks ties (the more specific rule first).
RULES: dict[str, tuple[Tier, str]] = {
    "changing-column-type": (
        Tier.REWRITE,
        "ACCESS EXCLUSIVE on {table} while every row is rewritten and every index rebuilt "
        "(unless the new type is binary-compatible, e.g. a wider varchar)",
    ),
    "adding-field-with-default": (
        Tier.REWRITE,
        "ACCESS EXCLUSIVE on {table} while every row is rewritten "
        "(a volatile default or a STORED generated column)",
    ),
    "prefer-repack": (
        Tier.REWRITE,
        "ACCESS EXCLUSIVE on {table} while it is rewritten (VACUUM FULL, CLUSTER)",
    ),
    "adding-serial-primary-key-field": (
        Tier.BUILD,
        "ACCESS EXCLUSIVE on {table} while the primary key's index is built: reads and writes wait",
    ),
    "disallowed-unique-constraint": (
        Tier.BUILD,
        "ACCESS EXCLUSIVE on {table} while the unique index is built: reads and writes wait",
    ),
    "require-concurrent-index-creation": (
        Tier.BUILD,
        "SHARE on {table} while the index is built: writes wait",
    ),
    "require-concurrent-reindex": (
        Tier.BUILD,
        "SHARE on {table} while the index is rebuilt (ACCESS EXCLUSIVE on the index: "
        "queries using it wait)",
    ),
    "adding-foreign-key-constraint": (
        Tier.SCAN,
        "SHARE ROW EXCLUSIVE on {table} and {ref} while every row is checked: writes to both wait",
    ),
    "adding-not-nullable-field": (
        Tier.SCAN,
        "ACCESS EXCLUSIVE on {table} while every row is scanned for NULLs: reads and writes wait",
    ),
    "setting-not-nullable-field": (
        Tier.SCAN,
        "ACCESS EXCLUSIVE on {table} while every row is scanned for NULLs: reads and writes wait",
    ),
    "constraint-missing-not-valid": (
        Tier.SCAN,
        "ACCESS EXCLUSIVE on {table} while every row is checked: reads and writes wait",
    ),
    "ban-alter-domain-with-add-constraint": (
        Tier.SCAN,
        "every column using the domain is checked, under a lock on its table",
    ),
    "adding-required-field": (
        Tier.FAILS,
        "fails on a table with rows (NOT NULL without a default); ACCESS EXCLUSIVE on {table}",
    ),
    "ban-uncommitted-transaction": (Tier.FAILS, "a BEGIN without its COMMIT"),
    "ban-truncate-cascade": (
        Tier.BREAKS,
        "ACCESS EXCLUSIVE on {table} and every table referencing it, whose rows go too",
    ),
    "ban-drop-table": (Tier.BREAKS, _BREAKS),
    "ban-drop-column": (Tier.BREAKS, _BREAKS),
    "ban-drop-not-null": (Tier.BREAKS, _BREAKS),
    "renaming-table": (Tier.BREAKS, _BREAKS),
    "renaming-column": (Tier.BREAKS, _BREAKS),
    "renaming-object": (
        Tier.BREAKS,
        "brief ACCESS EXCLUSIVE, but clients using the old name break",
    ),
    "ban-drop-database": (Tier.BREAKS, "the database and everything in it"),
    "transaction-nesting": (Tier.BREAKS, "BEGIN/COMMIT inside the runner's transaction"),
    "require-concurrent-index-deletion": (
        Tier.LOCK,
        "ACCESS EXCLUSIVE on {table}, brief, but it waits for every open transaction on it "
        "and every later query waits for it",
    ),
    "require-concurrent-partition-detach": (
        Tier.LOCK,
        "ACCESS EXCLUSIVE on {table}, brief, but it waits for every open transaction on it "
        "and every later query waits for it",
    ),
    # squawk runs with --assume-in-transaction, but queueguard's runner (like
    # temporal-sql-tool) runs a statement that cannot be in a transaction block alone
    "ban-concurrent-index-creation-in-transaction": (
        Tier.ADVISORY,
        "runs alone, outside the revision's transaction, under SHARE UPDATE EXCLUSIVE on "
        "{table} (blocks no writer); a failure leaves an INVALID index to drop",
    ),
    "require-lock-timeout": (Tier.ADVISORY, _TIMEOUT),
    "require-timeout-settings": (Tier.ADVISORY, _TIMEOUT),
    "require-statement-timeout": (Tier.ADVISORY, _TIMEOUT),
    "prefer-robust-stmts": (Tier.ADVISORY, "not re-runnable if it fails part way; " + _STYLE),
    "prefer-bigint-over-int": (Tier.ADVISORY, _STYLE),
    "prefer-bigint-over-smallint": (Tier.ADVISORY, _STYLE),
    "prefer-identity": (Tier.ADVISORY, _STYLE),
    "prefer-text-field": (Tier.ADVISORY, _STYLE),
    "prefer-timestamp-tz": (Tier.ADVISORY, _STYLE),
    "ban-char-field": (Tier.ADVISORY, _STYLE),
    "ban-create-domain-with-constraint": (
        Tier.ADVISORY,
        "no lock cost now; changing the constraint later checks every column using it",
    ),
    "require-enum-value-ordering": (Tier.ADVISORY, _STYLE),
    "identifier-too-long": (Tier.ADVISORY, "PostgreSQL truncates it to 63 bytes; " + _STYLE),
}
_ORDER = {rule: i for i, rule in enumerate(RULES)}

_NAME = r'(?:"(?:[^"]|"")+"|[\w$]+)(?:\s*\.\s*(?:"(?:[^"]|"")+"|[\w$]+))?'
_TABLE = [
    re.compile(rf"\bALTER\s+TABLE\s+(?:IF\s+EXISTS\s+)?(?:ONLY\s+)?({_NAME})", re.I),
    re.compile(rf"\bINDEX\b.*?\bON\s+(?:ONLY\s+)?({_NAME})", re.I | re.S),
    re.compile(rf"\bDROP\s+TABLE\s+(?:IF\s+EXISTS\s+)?({_NAME})", re.I),
    re.compile(rf"\bTRUNCATE\s+(?:TABLE\s+)?(?:ONLY\s+)?({_NAME})", re.I),
    re.compile(rf"\b(?:VACUUM\s+(?:\(.*?\)\s*)?(?:FULL\s+)?|CLUSTER\s+)({_NAME})", re.I | re.S),
]
_REFERENCES = re.compile(rf"\bREFERENCES\s+({_NAME})", re.I)
_COMMENT = re.compile(r"--[^\n]*|/\*.*?\*/", re.S)


def rule_of(finding: Finding) -> str:
    return finding.code.removeprefix("squawk.")


def tier_of(finding: Finding) -> Tier:
    return RULES.get(rule_of(finding), (Tier.OTHER, ""))[0]


def choose(findings: Sequence[Finding]) -> Finding:
    """The finding that matters on one statement (its findings, non-empty)."""
    return min(
        findings,
        key=lambda f: (
            -tier_of(f),
            _ORDER.get(rule_of(f), len(_ORDER)),
            f.line,
            f.column,
            f.code,
        ),
    )


def table_of(sql: str) -> str | None:
    """The table a DDL statement works on, as written (None: not recognised)."""
    text = _COMMENT.sub(" ", sql)
    for pattern in _TABLE:
        if found := pattern.search(text):
            return found.group(1)
    return None


def static_cost(finding: Finding, sql: str) -> str:
    """What squawk's rule says the statement costs, with the statement's table."""
    tier, template = RULES.get(rule_of(finding), (Tier.OTHER, ""))
    if tier is Tier.OTHER:
        return finding.message
    ref = _REFERENCES.search(_COMMENT.sub(" ", sql))
    return template.format(
        table=table_of(sql) or "its table", ref=ref.group(1) if ref else "the referenced table"
    )


@dataclass(frozen=True)
class Observed:
    """What `plan`'s trace says one statement costs: its tier and the sentence saying why."""

    tier: Tier
    cost: str


def ms(value: float) -> str:
    if value >= 60_000:
        return f"{value / 60_000:.1f} min"
    if value >= 1000:
        return f"{value / 1000:.1f} s"
    return f"{value:.0f} ms"


def _locks(pairs: Sequence[tuple[str, str]]) -> str:
    return ", ".join(f"{mode_of(mode)} on {rel}" for rel, mode in pairs)


def observed(line: Line) -> Observed:
    """The tier and cost of one statement as `plan` saw it run on the copy of the target.

    Only locks that block readers or writers on tables the target has count (`line.blocking`:
    a table created by a pending revision blocks nobody yet). Under such a lock, a rewrite is
    `rewrite`, a scan while an index is created `build`, any other scan `scan`; without a
    rewrite or a scan the statement is catalog-only, and without a blocking lock it blocks
    nobody: both are notes."""
    s = line.seen
    took = f"runs ~{ms(line.estimate_ms)}, locks held ~{ms(line.held_ms)}"
    if not line.blocking:
        held = _locks(s.locks) or "no lock on an existing table"
        work = [*(f"rewrites {r}" for r in s.rewrites), *(f"scans {t}" for t in s.scans)]
        return Observed(
            Tier.NOTE,
            f"observed: {held}; {', '.join(work) or 'catalog only'}: blocks no reader or "
            f"writer of a table the target has ({took})",
        )
    held = _locks(line.blocking)
    if s.rewrites:
        return Observed(
            Tier.REWRITE,
            f"observed: {held} while every row of {', '.join(s.rewrites)} is rewritten ({took})",
        )
    if s.scans and s.created:
        return Observed(
            Tier.BUILD,
            f"observed: {held} while {', '.join(s.created)} is built from "
            f"{', '.join(s.scans)} ({took})",
        )
    if s.scans:
        return Observed(
            Tier.SCAN,
            f"observed: {held} while every row of {', '.join(s.scans)} is scanned ({took})",
        )
    return Observed(Tier.NOTE, f"observed: {held}, catalog only (no rewrite, no scan) ({took})")
