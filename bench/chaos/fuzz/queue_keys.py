"""Target: the queue-key decoder (pure).

Any text, and mutations of valid keys (lowercase or needless escapes, leading zeros, empty
`@`, stray separators…): decode either returns components that encode back to the very
same key, or raises InvalidQueueKey.
"""

from __future__ import annotations

from hypothesis import strategies as st

from bench.chaos.fuzz.hostile_names import components, queue_of
from queueguard.core.keys import PhysicalQueue, decode, legacy_queue
from queueguard.errors import InvalidQueueKey


def check_key(key: str) -> str:
    try:
        decoded = decode(key, allow_auto=True)
    except InvalidQueueKey:
        return "rejected"
    encoded = decoded.key if isinstance(decoded, PhysicalQueue) else legacy_queue(*decoded)
    assert encoded == key, (key, encoded)
    return "accepted"


KEY_NOISE = ["%2f", "%2F", "%41", "%", "%G1", "%C3", "%c3%a9", "/", "@", "@@", "0", "+", " ", "~"]


@st.composite
def mutated_keys(draw: st.DrawFn) -> str:
    key = queue_of(draw(components)).key
    if draw(st.booleans()) and "@" not in key:
        key += "@auto"
    for _ in range(draw(st.integers(0, 3))):
        op = draw(st.sampled_from(["insert", "delete", "replace", "lower", "zero", "at"]))
        pos = draw(st.integers(0, len(key)))
        if op == "insert":
            key = key[:pos] + draw(st.sampled_from(KEY_NOISE) | st.characters()) + key[pos:]
        elif op == "delete" and key:
            key = key[:pos] + key[pos + 1 :]
        elif op == "replace" and pos < len(key):
            key = key[:pos] + draw(st.characters()) + key[pos + 1 :]
        elif op == "lower":
            key = key.lower()
        elif op == "zero":
            head, sep, tail = key.rpartition("/")
            key = f"{head}{sep}0{tail}"
        elif op == "at":
            key += "@"
    return key


key_inputs = st.one_of(
    st.text(max_size=60),
    mutated_keys(),
    components.map(lambda c: queue_of(c).key),
    st.text(alphabet="%/@0123456789abcdefABCDEF.-_~workflowactivity", max_size=40),
)
