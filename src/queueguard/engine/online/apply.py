"""Running one statement's online forms on the target, resumably: each form ends with a
transaction that records it done (`progress.write_step`), the last one with the hook the
runner passes (the statement done and, for a revision's last statement, its bookkeeping)."""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from types import ModuleType
from typing import Any

import psycopg

from queueguard.engine.apply import progress
from queueguard.engine.apply.session import Limits
from queueguard.engine.online import choose, not_valid
from queueguard.engine.online.choose import Form
from queueguard.engine.online.context import Context
from queueguard.sets import Revision

Finish = Callable[[psycopg.Connection[Any]], None]


#: the module of each form (the rebuild, the heaviest, is imported only when used)
_MODULES = {
    choose.CONCURRENT_INDEX: "index",
    choose.NOT_VALID: "not_valid",
    choose.NOT_NULL: "not_null",
    choose.UNIQUE_INDEX: "unique",
    choose.REBUILD: "rebuild",
}


def module(kind: str) -> ModuleType:
    return importlib.import_module(f"queueguard.engine.online.{_MODULES[kind]}")


def _rebuild(ctx: Context, form: Form, options: Mapping[str, Any]) -> None:
    """The rebuild with the throttle the command line asked for (`--batch-size`, `--pause`,
    `--max-lag`) and its progress callback."""
    rebuild = module(choose.REBUILD)
    knobs = {k: options[k] for k in ("batch_size", "pause_s", "max_lag_s") if k in options}
    rebuild.run(ctx, form, rebuild.Throttle(**knobs), options.get("on_progress"))


def encode(forms: Sequence[Form]) -> str:
    return json.dumps([asdict(f) for f in forms], sort_keys=True)


def decode(text: str) -> list[Form]:
    return [
        Form(d["kind"], d["table"], d["sql"], tuple(d["created"]), d["name"])
        for d in json.loads(text)
    ]


def resolve(
    conn: psycopg.Connection[Any], limits: Limits, rev: Revision, forms: Sequence[Form]
) -> list[Form]:
    """Forms whose object PostgreSQL names itself (a nameless CHECK or foreign key) with that
    name filled in and recorded in the progress row before anything is added, so a rerun or
    an abort knows which constraint is the statement's."""
    if all(f.kind != choose.NOT_VALID or f.name for f in forms):
        return list(forms)
    ctx = Context(conn, limits)
    named = [
        replace(f, name=not_valid.chosen_name(ctx, f)) if f.kind == choose.NOT_VALID else f
        for f in forms
    ]
    ctx.transaction(lambda c: progress.write_forms(c, rev, encode(named)))
    return named


def run_statement(
    conn: psycopg.Connection[Any],
    limits: Limits,
    rev: Revision,
    forms: Sequence[Form],
    *,
    step: int,
    finish: Finish,
    options: Mapping[str, Any] | None = None,
) -> list[tuple[str, float, bool]]:
    """Run `forms[step:]`; what ran (sql, seconds, in a transaction)."""
    ran: list[tuple[str, float, bool]] = []
    forms = resolve(conn, limits, rev, forms)
    for j in range(step, len(forms)):
        form = forms[j]
        done = j + 1

        def mark(c: psycopg.Connection[Any], done: int = done) -> None:
            progress.write_step(c, rev, done)

        ctx = Context(conn, limits, finish if done == len(forms) else mark)
        if form.kind == choose.PLAIN:
            ctx.execute(form.sql, last=True)
        elif form.kind == choose.REBUILD:
            _rebuild(ctx, form, options or {})
        else:
            module(form.kind).run(ctx, form)
        ran.extend(ctx.ran)
    return ran


@dataclass(frozen=True)
class OnlinePlan:
    """Which statements run online, by (revision, statement index), and the rebuild's
    options (throttle, progress callback)."""

    forms: Mapping[tuple[str, int], Sequence[Form]] = field(default_factory=dict)
    options: Mapping[str, Any] = field(default_factory=dict)
    #: the statement a killed run left in flight: (revision, index, forms, forms done)
    flight: tuple[str, int, Sequence[Form], int] | None = None

    def at(self, revision: str, index: int) -> tuple[Sequence[Form], int] | None:
        """The forms of statement `index` and how many are done already, if it runs online."""
        if self.flight is not None and self.flight[:2] == (revision, index):
            return self.flight[2], self.flight[3]
        forms = self.forms.get((revision, index))
        return (forms, 0) if forms else None
