"""A revision's mutants: every operator over every statement, validated and de-duplicated.

Order is deterministic: step files in execution order, statements in file order, operators in
their stable order (`operators.OPERATORS`), each operator's changes in source order. Only the
mutated statement's span changes; every other byte of the file (other statements, comments)
is kept. A change is skipped when its SQL does not parse back, when it leaves the file as it
was, or when an earlier mutant already wrote the same file text.
"""

from __future__ import annotations

from collections.abc import Sequence

from queueguard.lint.model import SqlFile
from queueguard.mutate.model import Mutant
from queueguard.mutate.operators import OPERATORS, Change, Operator
from queueguard.mutate.sites import RevisionSites, Site, parse_query, revision_sites
from queueguard.revisions import SetFacts


def generate(
    migrations: SetFacts,
    revision: str | None = None,
    operators: Sequence[Operator] = OPERATORS,
) -> list[Mutant]:
    """The mutants of `revision` (default: the head) of the migration set."""
    return mutants_of(revision_sites(migrations, revision or migrations.head.id), operators)


def mutants_of(sites: RevisionSites, operators: Sequence[Operator] = OPERATORS) -> list[Mutant]:
    """The mutants of one revision's statements."""
    found: list[Mutant] = []
    seen: set[tuple[str, str]] = set()
    for site in sites.sites:
        for operator in operators:
            for change in operator.generate(site, sites):
                mutant = _mutant(site, operator.name, change)
                key = (mutant.file, mutant.text)
                if mutant.text == site.file.text or key in seen or not _reparses(site, change):
                    continue
                if SqlFile(site.file.path, "migration", mutant.text).syntax_error:
                    continue
                seen.add(key)
                found.append(mutant)
    return found


def _mutant(site: Site, operator: str, change: Change) -> Mutant:
    start, end = change.span or (site.statement.start, site.statement.end)
    text = site.file.text
    return Mutant(
        operator=operator,
        file=site.path,
        statement=site.index,
        line=site.line,
        original=site.text,
        mutated=change.text,
        text=text[:start] + change.text + text[end:],
        description=change.description,
        before=change.before,
    )


def _reparses(site: Site, change: Change) -> bool:
    if not change.text:
        return True
    if change.tree:
        return parse_query(change.text[len(site.prefix) :]) is not None
    pieces = SqlFile(site.file.path, "migration", change.text).statements
    return bool(pieces) and all(p.parsed[1] is None for p in pieces)


def rendered_files(sites: RevisionSites) -> dict[str, str]:
    """Each step file with every statement that has a tree replaced by sqlglot's rendering of
    it, unchanged: what the mutants made on trees are made from (the baseline checks that the
    gates accept it)."""
    files: dict[str, str] = {}
    for path, file in sites.files:
        text = file.text
        for site in reversed([s for s in sites.of(path) if s.rendered is not None]):
            assert site.rendered is not None
            text = text[: site.statement.start] + site.rendered + text[site.statement.end :]
        files[path] = text
    return files
