"""`queueguard lint`: the migration safety gate, built on squawk and sqlglot.

It catches the classic mistakes of queue-state migrations before a reviewer has to:
squawk's general PostgreSQL migration rules (`queueguard.lint.squawk`), then our own rules in
the order of `queueguard.lint.rules.RULES` (tamper detection, read-only audit queries, lock
order, set-based data moves, no hot-path triggers). Inline `-- lint-allow` markers silence a
finding per file with a justification (`queueguard.lint.silences`).

Revisions 001–003 were released before the gate existed: they are frozen history, checked by
their manifest hashes only. 004 and every later revision pass every rule or carry a justified
marker. See docs/lint.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from queueguard import revisions
from queueguard.errors import QueueguardError, SplitError, UsageError
from queueguard.lint import squawk
from queueguard.lint.model import Corpus, Finding, Kind, SqlFile
from queueguard.lint.rules import RULES
from queueguard.lint.sets.statements import Located, containing, locate
from queueguard.lint.silences import Silenced, apply
from queueguard.queue_schema.manifest import MANIFEST
from queueguard.resources import audit_dir, migrations_dir

__all__ = ["Finding", "LintFailed", "Report", "discover", "lint", "predating_lint"]
SYNTAX = "lint.syntax"
_SYNTAX_HINT = "fix the SQL syntax (an unterminated quote, comment or dollar-quoted body)"
#: Codes no inline marker can silence.
UNSILENCEABLE: tuple[str, ...] = ("lint.*", *(r.code for r in RULES if not r.silenceable))


class LintFailed(QueueguardError):
    """The gate found problems (raised by `lint(..., raise_on_findings=True)`)."""

    def __init__(self, findings: Sequence[Finding]) -> None:
        self.findings = list(findings)
        super().__init__(f"queueguard lint: {len(self.findings)} finding(s)")


@dataclass(frozen=True)
class Report:
    """The outcome of one lint run."""

    findings: tuple[Finding, ...]
    silenced: tuple[Silenced, ...] = ()
    files: int = 0
    squawk_version: str | None = None
    base: Path = field(default_factory=Path.cwd)

    @property
    def ok(self) -> bool:
        return not self.findings

    @property
    def exit_code(self) -> int:
        return 0 if self.ok else 1

    def as_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "findings": [
                {
                    **f.as_json(self.base),
                    "statement_line": f.statement[0] if f.statement else None,
                    "statement_column": f.statement[1] if f.statement else None,
                }
                for f in self.findings
            ],
            "silenced": [s.as_json(self.base) for s in self.silenced],
            "files": self.files,
            "squawk": self.squawk_version,
        }

    def render_text(self) -> str:
        """One `file:line:column: code message (hint: …)` line per finding."""
        return "\n".join(f.render(self.base) for f in self.findings)

    def summary(self) -> str:
        verdict = "clean" if self.ok else f"{len(self.findings)} finding(s)"
        return (
            f"queueguard lint: {verdict} in {self.files} file(s); "
            f"{len(self.silenced)} silenced by lint-allow markers"
        )


def default_paths() -> list[Path]:
    """The packaged migrations/ and audit_queries/."""
    return [migrations_dir(), Path(str(audit_dir()))]


def lint(
    paths: Sequence[Path | str] | None = None,
    *,
    raise_on_findings: bool = False,
    squawk_binary: Path | None = None,
) -> Report:
    """Lint migration directories, revision step files, audit queries or standalone files.

    With `raise_on_findings`, findings raise `LintFailed` instead of being returned.
    """
    corpus = discover([Path(p) for p in paths] if paths else default_paths())
    version = None
    findings: list[Finding] = []
    if corpus.migration_files:
        binary = squawk_binary or squawk.locate()
        version = squawk.checked_version(binary)
        findings += squawk.run(corpus.migration_files, binary)
    for rule in RULES:
        findings += rule.check(corpus)
    findings += [
        f.finding(SYNTAX, 0, f"sqlglot cannot tokenize this file ({f.syntax_error})", _SYNTAX_HINT)
        for f in corpus.migration_files
        if f.syntax_error
    ]
    kept, silenced = apply(findings, corpus.checked_files, UNSILENCEABLE)
    kept = _with_statements(kept, corpus.checked_files)
    kept.sort(key=lambda f: (str(f.path), f.line, f.column, f.code))
    report = Report(
        tuple(kept),
        tuple(silenced),
        len(corpus.checked_files) + len(corpus.frozen_files),
        version,
    )
    if raise_on_findings and not report.ok:
        raise LintFailed(report.findings)
    return report


def _with_statements(findings: list[Finding], files: Sequence[SqlFile]) -> list[Finding]:
    """Each finding with where its statement starts: the last statement (as `sets.split`
    cuts the file, leading comments included) beginning at or before it, the first for one
    before every statement. A file that does not split keeps its findings' own places."""
    located: dict[Path, list[Located]] = {}
    for file in files:
        try:
            located[file.path] = locate(file.text)
        except SplitError:
            continue
    out = []
    for f in findings:
        stmt = containing(located.get(f.path, []), f.line, f.column)
        out.append(replace(f, statement=(stmt.line, stmt.column)) if stmt else f)
    return out


def discover(paths: Sequence[Path]) -> Corpus:
    """Classify the paths into the corpus the rules read.

    A directory holding `sql/` is a migration script directory: each `sql/<rev>/` is a
    revision, and its `manifest.json` is checked. A step file given alone is linted with its
    whole revision (lock order spans the revision's transaction). A `.sql` file in a folder
    named `audit_queries` is an audit query; any other `.sql` file is a standalone migration.
    Other directories are searched for `.sql` files.
    """
    found = _Found()
    for path in paths:
        if not path.exists():
            raise UsageError(f"lint: {path}: no such file or directory")
        found.add(path.resolve())
    units: list[tuple[SqlFile, ...]] = []
    frozen: list[SqlFile] = []
    for root, revision in found.revisions:
        steps = tuple(
            _read(p, "migration", revision) for p in sorted((root / "sql" / revision).glob("*.sql"))
        )
        if revision in predating_lint(root):
            frozen += steps
        elif steps:
            units.append(steps)
    audits = [_read(p, "audit") for p, kind in found.files.items() if kind == "audit"]
    units += [(_read(p, "migration"),) for p, kind in found.files.items() if kind == "migration"]
    return Corpus(tuple(found.roots), tuple(units), tuple(audits), tuple(frozen))


def predating_lint(root: Path) -> frozenset[str]:
    """Revisions of the script directory at `root` released before the gate existed (the
    `predates_lint` fact): their hashes are checked, their style is not. A folder of step
    files without revision files has none."""
    if not (root / "versions").is_dir():
        return frozenset()
    return frozenset(r.id for r in revisions.load(root).revisions if r.predates_lint)


class _Found:
    """Ordered, de-duplicated discovery results."""

    def __init__(self) -> None:
        self.roots: dict[Path, None] = {}
        self.revisions: dict[tuple[Path, str], None] = {}
        self.files: dict[Path, Kind] = {}

    def add(self, path: Path) -> None:
        if path.is_dir():
            self._directory(path)
        else:
            self._file(path)

    def _directory(self, folder: Path) -> None:
        if (folder / "sql").is_dir():
            self.roots[folder] = None
            for rev in sorted((folder / "sql").iterdir()):
                if rev.is_dir() and rev.name.isdigit():
                    self.revisions[(folder, rev.name)] = None
            return
        for child in sorted(folder.iterdir()):
            if child.name.startswith(".") or child.name == "__pycache__":
                continue
            if child.is_dir():
                self._directory(child)
            elif child.suffix == ".sql":
                self._file(child)

    def _file(self, path: Path) -> None:
        parent = path.parent
        if parent.name.isdigit() and parent.parent.name == "sql":
            root = parent.parent.parent
            self.revisions[(root, parent.name)] = None
            if (root / MANIFEST).is_file():
                self.roots[root] = None
        else:
            self.files[path] = "audit" if parent.name == "audit_queries" else "migration"


def _read(path: Path, kind: Kind, revision: str | None = None) -> SqlFile:
    try:
        return SqlFile.read(path, kind, revision)
    except (OSError, UnicodeDecodeError) as exc:
        raise QueueguardError(f"lint: cannot read {path}: {exc}") from None
