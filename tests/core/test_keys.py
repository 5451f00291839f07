"""The physical queue key (docs/data-model.md): frozen, canonical, injective."""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import quote

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from queueguard.core.keys import (
    AUTO_VERSION,
    MAX_PARTITION,
    TASK_TYPES,
    PhysicalQueue,
    decode,
    legacy_queue,
    validate_components,
)
from queueguard.errors import InvalidQueueKey
from queueguard.pg.connect import connection
from queueguard.stores.postgres import PostgresStore

Components = tuple[str, str, str, int, str]

TRICKY = ["/", "@", "%", ":", "'", '"', " ", "a b", "é", "日本", "🚀", "%2F", "a@b/c", "~._-"]
# Text PostgreSQL can store: UTF-8 without NUL (lone surrogates and NUL are rejected below).
_chars = st.characters(codec="utf-8", exclude_characters="\x00")
names = st.one_of(
    st.sampled_from(TRICKY),
    st.text(_chars, min_size=1),
    st.text(_chars, min_size=1000, max_size=1100),
)
versions = st.one_of(st.just(""), st.builds(lambda a, b: f"{a}.{b}", st.text(_chars), names))
partitions = st.integers(min_value=0, max_value=MAX_PARTITION)
task_types = st.sampled_from(TASK_TYPES)
components = st.tuples(names, names, task_types, partitions, versions)
# Lists of keys draw short names: 20 tuples of 1,000-character names cost hypothesis seconds per
# example, and a name's length does not change how the key escapes it (long ones: round trip).
short_names = st.one_of(st.sampled_from(TRICKY), st.text(_chars, min_size=1, max_size=40))
short_versions = st.one_of(
    st.just(""), st.builds(lambda a, b: f"{a}.{b}", st.text(_chars, max_size=20), short_names)
)
short_components = st.tuples(short_names, short_names, task_types, partitions, short_versions)


def _spec_key(ns: str, tq: str, task_type: str, partition: int, version: str) -> str:
    """The key exactly as docs/data-model.md spells it."""
    base = f"{quote(ns, safe='')}/{quote(tq, safe='')}/{task_type}/{partition}"
    return f"{base}@{quote(version, safe='')}" if version else base


# round trip, spec equality, injectivity -----------------------------------------------
@given(components)
@example(("a/b", "c@d", "workflow", 0, "dep.build/1"))
@example(("%", "100%", "activity", 7, "x.%41"))
@example(("x" * 1024, "名前 with spaces", "workflow", MAX_PARTITION, ""))
def test_key_round_trips_and_matches_urllib_quote(parts: Components) -> None:
    queue = PhysicalQueue(*parts)
    assert queue.key == _spec_key(*parts)
    assert decode(queue.key) == queue
    assert legacy_queue(*parts) == queue.key


@given(st.lists(short_components, min_size=2, max_size=20, unique=True))
@example([("a/b", "c", "workflow", 0, ""), ("a", "b/c", "workflow", 0, "")])
@example([("a", "b", "workflow", 1, ""), ("a", "b", "workflow", 1, "1.")])
@example([("a@b", "c", "workflow", 0, ""), ("a", "c", "workflow", 0, "b.")])
@example([("a", "b", "workflow", 0, ""), ("a", "b", "activity", 0, "")])
@example([("x" * 1024, "b", "workflow", 0, ""), ("x" * 1023, "xb", "workflow", 0, "")])
def test_distinct_components_give_distinct_keys(tuples: list[Components]) -> None:
    keys = [PhysicalQueue(*t).key for t in tuples]
    assert len(set(keys)) == len(tuples)


@given(st.lists(short_components, min_size=2, max_size=20))
@example([("x" * 1024, "日本", "workflow", 0, ""), ("🚀" * 1000, "b", "activity", 3, "v.1")])
def test_keys_are_ascii_so_text_order_is_byte_order(tuples: list[Components]) -> None:
    keys = [PhysicalQueue(*t).key for t in tuples]
    assert all(k.isascii() for k in keys)
    assert sorted(keys) == sorted(keys, key=lambda k: k.encode("utf-8"))


def test_database_orders_keys_by_bytes(head_db: str) -> None:
    """`COLLATE "C"`: the database sorts keys as Python sorts their bytes."""
    queues = [
        PhysicalQueue(ns, "tq", task_type, partition)
        for ns in ("a", "B", "b", "_x", "-x", "~x", "é", "a b", "a.b", "Z")
        for task_type in TASK_TYPES
        for partition in (1, 10, 2)
    ]
    store = PostgresStore(head_db, pool_size=1)
    try:
        for queue in queues:
            store.load_queue(queue)
    finally:
        store.close()
    with connection(head_db) as conn:
        stored = [r[0] for r in conn.execute("SELECT physical_queue FROM task_queues ORDER BY 1")]
    assert stored == sorted((q.key for q in queues), key=lambda k: k.encode("utf-8"))


# decode accepts only canonical keys -------------------------------------------------------
@given(st.text(max_size=40))
@example("a/b/workflow/0")
@example("a%2Fb/c/activity/3@d.e")
def test_decode_accepts_exactly_the_canonical_spelling(text: str) -> None:
    """Any string either is rejected or re-encodes to itself."""
    try:
        queue = decode(text)
    except InvalidQueueKey:
        return
    assert isinstance(queue, PhysicalQueue)
    assert queue.key == text


@pytest.mark.parametrize(
    "key",
    [
        "a%2fb/tq/workflow/0",  # lowercase hex
        "caf%c3%a9/tq/workflow/0",  # lowercase hex of a multi-byte character
        "%41/tq/workflow/0",  # an unreserved character quoted
        "a%7Eb/tq/workflow/0",  # '~' is kept by quote(), never quoted
        "a/tq/workflow/00",
        "a/tq/workflow/01",
        "a/tq/workflow/-1",
        "a/tq/workflow/+1",
        "a/tq/workflow/ 1",
        "a/tq/workflow/1.0",
        "a/tq/workflow/",
        "a/tq/workflow/٣",  # a non-ASCII digit
        f"a/tq/workflow/{MAX_PARTITION + 1}",
        "a/tq/workflow/0@",  # empty version suffix
        "a/tq/workflow/0@v1",  # version without a dot
        "a/tq/workflow/0@x.y@z",
        "a/tq/workflow/0@auto",  # legacy pseudo-version
        "a/tq/workflow",
        "a/tq/workflow/0/extra",
        "",
        "/tq/workflow/0",  # empty namespace
        "a//workflow/0",  # empty family
        "a/tq/nexus/0",
        "a/tq/Workflow/0",
        "a b/tq/workflow/0",  # unquoted space
        "é/tq/workflow/0",  # unquoted non-ASCII
        "a'/tq/workflow/0",
        "%FF/tq/workflow/0",  # invalid UTF-8
        "%C3/tq/workflow/0",  # truncated sequence
        "%C0%AF/tq/workflow/0",  # overlong encoding of '/'
        "%ED%A0%80/tq/workflow/0",  # an encoded surrogate
        "a%00b/tq/workflow/0",  # NUL cannot be stored in PostgreSQL text
        "%2/tq/workflow/0",
        "a%/tq/workflow/0",
    ],
)
def test_non_canonical_keys_are_rejected(key: str) -> None:
    with pytest.raises(InvalidQueueKey):
        decode(key)


def test_legacy_auto_key_decodes_only_when_allowed() -> None:
    key = legacy_queue("ns", "tq", "workflow", 2, AUTO_VERSION)
    assert key == "ns/tq/workflow/2@auto"
    assert decode(key, allow_auto=True) == ("ns", "tq", "workflow", 2, AUTO_VERSION)
    with pytest.raises(InvalidQueueKey):
        decode(key)


# invalid components -----------------------------------------------------------------------
BAD_COMPONENTS: list[tuple[str, Components]] = [
    ("unknown task type", ("ns", "tq", "nexus", 0, "")),
    ("task type case", ("ns", "tq", "Activity", 0, "")),
    ("negative partition", ("ns", "tq", "workflow", -1, "")),
    ("partition beyond int4", ("ns", "tq", "workflow", MAX_PARTITION + 1, "")),
    ("bool partition", ("ns", "tq", "workflow", True, "")),  # type: ignore[list-item]
    ("str partition", ("ns", "tq", "workflow", "0", "")),  # type: ignore[list-item]
    ("empty namespace", ("", "tq", "workflow", 0, "")),
    ("empty family", ("ns", "", "workflow", 0, "")),
    ("version without a dot", ("ns", "tq", "workflow", 0, "v1")),
    ("auto version", ("ns", "tq", "workflow", 0, AUTO_VERSION)),
    ("NUL in a name", ("n\x00s", "tq", "workflow", 0, "")),
    ("NUL in a version", ("ns", "tq", "workflow", 0, "d.\x00")),
    ("lone surrogate", ("ns", "t\ud800q", "workflow", 0, "")),
]


@pytest.mark.parametrize(
    "parts", [p for _, p in BAD_COMPONENTS], ids=[name for name, _ in BAD_COMPONENTS]
)
def test_invalid_components_are_rejected(parts: Components) -> None:
    with pytest.raises(InvalidQueueKey):
        PhysicalQueue(*parts)
    with pytest.raises(InvalidQueueKey):
        validate_components(*parts)


@pytest.mark.parametrize(
    "build",
    [
        lambda: PhysicalQueue("ns", "tq").with_version("nodot"),
        lambda: PhysicalQueue("ns", "tq").with_version(AUTO_VERSION),
        lambda: legacy_queue("ns", "tq", "workflow", 0, "nodot"),
        lambda: legacy_queue("", "tq", "workflow", 0, AUTO_VERSION),
    ],
)
def test_derived_queues_are_validated(build: Callable[[], object]) -> None:
    with pytest.raises(InvalidQueueKey):
        build()


def test_auto_is_accepted_only_with_allow_auto() -> None:
    validate_components("ns", "tq", "workflow", 0, AUTO_VERSION, allow_auto=True)
    with pytest.raises(InvalidQueueKey):
        validate_components("ns", "tq", "workflow", 0, AUTO_VERSION)
