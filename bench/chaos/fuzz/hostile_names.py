"""Hostile names: injection strings, arbitrary text, and queue components built from them."""

from __future__ import annotations

from hypothesis import strategies as st

from queueguard.core.keys import MAX_PARTITION, PhysicalQueue

INJECTIONS = [
    "'; DROP TABLE tasks; --",
    '"; DROP TABLE task_queues; --',
    "x' OR '1'='1",
    "$$; DROP TABLE executions; $$",
    "Robert'); DROP TABLE scheduled_tasks;--",
    "%s",
    "%(key)s",
    "{0}{key}",
    "\\'\\\\",
    "/* */ -- ",
    "a/b@c%2Fd",
    "@auto",
    "ns/../../etc",
    "\u202eevil",
    "😈 ünïcødé",
    "E'\\x00'",
    "'||pg_sleep(5)||'",
    "\t\n\r",
    "; COPY tasks TO PROGRAM 'id'; --",
]


def storable(text: str) -> bool:
    """What PostgreSQL text can hold: UTF-8 without NUL (no lone surrogates)."""
    if "\x00" in text:
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


names = st.one_of(
    st.sampled_from(INJECTIONS),
    st.text(min_size=1, max_size=24).filter(storable),
    st.tuples(st.sampled_from(INJECTIONS), st.text(max_size=8)).map("".join).filter(storable),
)
versions = st.one_of(
    st.just(""),
    names.map(lambda n: n if "." in n else n + ".build-1").filter(lambda v: v != "auto"),
)
components = st.tuples(
    names, names, st.sampled_from(["workflow", "activity"]), st.integers(0, MAX_PARTITION), versions
)


def queue_of(c: tuple[str, str, str, int, str]) -> PhysicalQueue:
    return PhysicalQueue(*c)
