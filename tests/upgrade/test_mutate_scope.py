"""`queueguard mutate --scope`: the step files (default), the online path, or both."""

from __future__ import annotations

import pytest

from queueguard import revisions
from queueguard.errors import UsageError
from queueguard.mutate import session


@pytest.mark.slow
def test_the_scopes_split_the_mutants_of_004_by_file() -> None:
    migrations = revisions.packaged()
    steps = session.plan(migrations, "004").selected
    online = session.plan(migrations, "004", scope="online").selected
    both = session.plan(migrations, "004", scope="all").selected
    assert steps and online and len(both) == len(steps) + len(online)
    assert all("/online/" not in m.file for m in steps)
    assert all(m.file.startswith("sql/004/online/") for m in online)
    assert {m.id for m in both} == {m.id for m in steps} | {m.id for m in online}


def test_an_unknown_scope_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="--scope"):
        session.plan(revisions.packaged(), "004", scope="everything")
