"""The element form of list values (elements.py), without a server: a list split into
elements and joined again is the same list, element bytes are what serializing each
alone gives, every element is verified by its digest, and the cache stays bounded."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from langgraph_durable.core import elements, manifests
from langgraph_durable.core.compression import Compression
from langgraph_durable.core.elements import ElementCache, ElementDamagedError
from langgraph_durable.core.errors import RecordDamagedError

SERDE = JsonPlusSerializer()
texts = st.text(min_size=0, max_size=300)
messages = st.one_of(
    st.builds(HumanMessage, content=texts),
    st.builds(AIMessage, content=texts, id=st.uuids().map(str)),
    st.builds(ToolMessage, content=texts, tool_call_id=st.text(min_size=1, max_size=20)),
)
ints = st.integers(min_value=-(2**63), max_value=2**64 - 1)  # what msgpack can hold
values = st.lists(
    st.one_of(messages, texts, ints, st.dictionaries(texts, ints, max_size=3)),
    max_size=12,
)


def split(value: Any, cache: ElementCache | None = None, **kw: Any) -> Any:
    return elements.split(
        SERDE,
        Compression("zstd", min_bytes=64),
        value,
        cache or ElementCache(),
        thread_id="t",
        what="a test value",
        limit=1 << 20,
        **kw,
    )


@given(values)
def test_a_split_list_joins_back_to_the_same_list(value: list[Any]) -> None:
    parts, whole = split(value, min_elements=1)
    if parts is None:  # not worth splitting: the whole value was serialized on the way
        assert whole is None or SERDE.loads_typed(whole) == value
        return
    serialized = [Compression.unpack(*elements.unpack(d, parts.stored[d])) for d in parts.digests]
    assert [SERDE.loads_typed(s) for s in serialized] == value
    joined = elements.joined(*zip(*serialized))
    assert joined is not None and SERDE.loads_typed(joined) == value
    assert elements.digests_of(parts.manifest) == parts.digests


@given(values)
def test_an_elements_bytes_are_what_serializing_it_alone_gives(value: list[Any]) -> None:
    parts = manifests.msgpack_elements(SERDE.dumps_typed(value), len(value))
    assert parts == [SERDE.dumps_typed(e)[1] for e in value]


dicts = st.dictionaries(
    st.one_of(texts, ints),
    st.one_of(messages, texts, ints, st.lists(texts, max_size=3)),
    max_size=8,
)


@given(dicts)
def test_a_split_dict_joins_back_to_the_same_dict(value: dict[Any, Any]) -> None:
    parts, whole = split(value)
    if parts is None:  # not worth splitting: the whole value was serialized on the way
        assert whole is None or SERDE.loads_typed(whole) == value
        return
    assert parts.mark == manifests.MAP_MARK and len(parts.keys) == len(value)
    named = manifests.digests_in(parts.mark, parts.manifest)
    assert isinstance(named, manifests.MapDigests)
    assert tuple(named) == parts.digests and named.keys == parts.keys
    serialized = [Compression.unpack(*elements.unpack(d, parts.stored[d])) for d in parts.digests]
    joined = manifests.joined_map(named.keys, *zip(*serialized))
    assert SERDE.loads_typed(joined) == value
    # re-keyed digests (resign) keep the keys
    other = [bytes(16 - len(str(i))) + str(i).encode() for i in range(len(value))]
    renamed = manifests.with_digests(parts.mark, parts.manifest, other)
    again = manifests.digests_in(parts.mark, renamed)
    assert list(again) == other and again.keys == parts.keys


@given(st.binary(max_size=200))
def test_a_dict_manifest_that_does_not_parse_exactly_is_damage(data: bytes) -> None:
    try:
        named = manifests.digests_in(manifests.MAP_MARK, data)
    except RecordDamagedError:
        return
    # what parses names exactly its count of keys and digests, and nothing else
    assert len(named) == len(named.keys) == int.from_bytes(data[:4], "big") > 0
    assert 4 + sum(map(len, named.keys)) + 16 * len(named) == len(data)


def test_a_dict_of_documents_is_split_and_a_dict_of_small_values_is_not() -> None:
    docs = {f"docs/{i}.md": "text " * 200 for i in range(3)}
    parts, _ = split(docs)
    assert parts is not None and parts.keys is not None and len(parts.stored) == 1  # same text
    assert split({"a": 1, "b": 2})[0] is None
    assert split({})[0] is None


def test_lists_of_small_elements_stay_whole() -> None:
    parts, whole = split(list(range(50)))
    assert parts is None and SERDE.loads_typed(whole) == list(range(50))
    assert split([HumanMessage("x" * 100)]) == (None, None)  # one element: not a list to split
    assert split(("a" * 100, "b" * 100)) == (None, None)  # a tuple stays as it is


def test_an_element_is_verified_by_its_digest() -> None:
    parts, _ = split([HumanMessage("x" * 200), HumanMessage("y" * 200)])
    digest = parts.digests[0]
    stored = parts.stored[digest]
    assert Compression.unpack(*elements.unpack(digest, stored))[0] == "msgpack"
    with pytest.raises(ElementDamagedError, match="checksum mismatch element"):
        elements.unpack(digest, stored[:-1] + bytes([stored[-1] ^ 1]))
    with pytest.raises(ElementDamagedError, match=f"missing element {digest.hex()}"):
        elements.unpack(digest, None)
    with pytest.raises(RecordDamagedError):
        elements.digests_of(parts.manifest[:-1])  # not a whole number of digests


def test_a_cached_element_is_not_hashed_or_compressed_again() -> None:
    cache = ElementCache()
    value = [HumanMessage("x" * 200, id="1"), HumanMessage("y" * 200, id="2")]
    first, _ = split(value, cache)
    again, _ = split(value, cache)
    assert again == first
    assert all(cache.get(d) is not None for d in first.digests)


def test_the_cache_stays_within_its_bound() -> None:
    cache = ElementCache(max_bytes=1000)
    for i in range(20):
        cache.add(bytes([i]) * 16, "msgpack", b"x" * 100, None, None)
        assert cache._size <= 1000
    assert cache.get(bytes([19]) * 16) is not None
    cache.add(b"z" * 16, "msgpack", b"x" * 2000, None, None)  # larger than the bound
    assert cache.get(b"z" * 16) is None


def test_one_content_registered_twice_at_once_keeps_the_first_stored_form() -> None:
    """Two writes of one content at once (a task's put_writes and the checkpoint's put,
    on two threads) each made a stored form (under encryption: two ciphertexts); the
    cache hands the second the first's, so the content is stored once."""
    cache = ElementCache()
    plain = b"msgpack\x00" + b"x" * 100
    first = cache.add(b"d1" * 8, "msgpack", b"x" * 100, plain, b"ciphertext one")
    second = cache.add(b"d2" * 8, "msgpack", b"x" * 100, plain, b"ciphertext two")
    assert first == second == (b"d1" * 8, b"ciphertext one")
    assert cache.by_content(plain) == first


# What the parsers are handed, in any order: whole lists, dicts, and damaged copies of
# them (cut short, grown, a byte changed), so a parse that stops short or raises comes
# before one that must be exact.
def _damaged(data: bytes, how: int, at: int) -> bytes:
    at %= len(data) + 1
    return [data, data[:at], data + data[:at], data[:at] + b"\xc1" + data[at + 1 :]][how]


parses = st.lists(
    st.tuples(
        st.one_of(values, dicts), st.integers(0, 3), st.integers(0, 10_000), st.integers(0, 12)
    ),
    min_size=1,
    max_size=6,
)


@given(parses)
def test_a_reused_unpacker_parses_as_a_fresh_one(steps: list[tuple[Any, int, int, int]]) -> None:
    """manifests.py reuses one msgpack Unpacker a thread for short inputs: whatever came
    before (a parse that stopped short or raised), each answer is a fresh Unpacker's."""

    def answers() -> list[Any]:
        out: list[Any] = []
        for value, how, at, start in steps:
            type_, data = SERDE.dumps_typed(value)
            data = _damaged(data, how, at)
            if isinstance(value, dict):
                out.append(manifests.msgpack_map_items((type_, data), len(value)))
            else:
                out.append(manifests.msgpack_elements((type_, data), len(value)))
            out.append(manifests.msgpack_tail(data, min(start, len(data)), 1, 1))
        return out

    reused = answers()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(manifests, "REUSED_BELOW", 0)  # every parse a fresh Unpacker
        assert answers() == reused


class _Token(bytes):
    """A subclass of bytes (as numpy.bytes_ is): LangGraph's serializer passes it through."""


record_bodies = st.lists(
    st.one_of(
        st.none(),
        texts,
        st.binary(max_size=70_000),
        st.binary(max_size=64).map(_Token),
        st.binary(max_size=64).map(bytearray),
        ints,
        st.booleans(),
    ),
    max_size=8,
)


@given(record_bodies)
def test_a_record_body_is_packed_as_msgpack_packs_it(body: list[Any]) -> None:
    # codec.seal packs with ormsgpack (no Packer made per record): records written before
    # and after read alike, and a resend of a value stores the very bytes again
    import msgpack

    from langgraph_durable.core.codec import packed_body

    assert packed_body(body) == msgpack.packb(body, use_bin_type=True)
