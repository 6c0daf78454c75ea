"""A put's split remembered (split_memo.py), without a server: splitting a value with the
memo gives exactly what splitting it afresh gives, whatever happened to the value since
the split remembered (appended to, edited, shortened, replaced, encrypted), and the
remembered entries are not cut, hashed or looked up again."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from langgraph_durable.core import elements
from langgraph_durable.core.compression import Compression
from langgraph_durable.core.elements import ElementCache
from langgraph_durable.core.split_memo import SplitMemo

SERDE = JsonPlusSerializer()
doc = st.text(min_size=60, max_size=200)  # worth splitting: 64+ bytes on average


def split(value: Any, cache: ElementCache, memo: SplitMemo | None, serde: Any = SERDE) -> Any:
    return elements.split(
        serde,
        Compression("zstd", min_bytes=64),
        value,
        cache,
        thread_id="t",
        what="the value of channel 'c'",
        limit=1 << 20,
        memo=memo,
    )


def same(a: elements.Split | None, b: elements.Split | None) -> None:
    assert (a is None) == (b is None)
    if a is not None and b is not None:
        assert (a.digests, a.keys, a.manifest) == (b.digests, b.keys, b.manifest)
        assert a.stored == b.stored


edits = st.lists(
    st.one_of(
        st.tuples(st.just("append"), doc),
        st.tuples(st.just("edit"), st.integers(0, 50), doc),
        st.tuples(st.just("drop"), st.integers(0, 50)),
        st.tuples(st.just("same length"), st.integers(0, 50)),
        st.tuples(st.just("replace"), st.lists(doc, max_size=4)),
    ),
    min_size=1,
    max_size=12,
)


@given(st.lists(doc, max_size=6), edits, st.booleans())
def test_a_split_with_the_memo_is_the_split_without_it(
    start: list[str], steps: list[Any], mapping: bool
) -> None:
    cache, memo = ElementCache(), SplitMemo()
    value = list(start)
    for step in steps:
        if step[0] == "append":
            value.append(step[1])
        elif step[0] == "edit" and value:
            value[step[1] % len(value)] = step[2]
        elif step[0] == "drop" and value:
            del value[step[1] % len(value)]
        elif step[0] == "same length" and value:  # the bytes change, not their length
            at = step[1] % len(value)
            last = value[at][-1:]
            if last.isascii():
                value[at] = value[at][:-1] + ("a" if last != "a" else "b")
        elif step[0] == "replace":
            value = list(step[1])
        shaped: Any = {f"k{i}": v for i, v in enumerate(value)} if mapping else list(value)
        with_memo, whole = split(shaped, cache, memo)
        afresh, whole_afresh = split(shaped, cache, None)
        same(with_memo, afresh)
        assert whole == whole_afresh


def test_a_grown_list_cuts_and_hashes_only_its_new_entries(monkeypatch: pytest.MonkeyPatch) -> None:
    cache, memo = ElementCache(), SplitMemo()
    history = [HumanMessage(content="q" * 300, id=f"h{i}") for i in range(40)]
    split(history, cache, memo)
    looked_up: list[bytes] = []
    by_content = cache.by_content
    monkeypatch.setattr(
        cache, "by_content", lambda plain: looked_up.append(plain) or by_content(plain)
    )
    grown = [*history, AIMessage(content="a" * 300, id="new")]
    made, _ = split(grown, cache, memo)
    assert len(looked_up) == 1, "the remembered entries were looked up again"
    monkeypatch.undo()
    same(made, split(grown, ElementCache(), None)[0])


def test_another_thread_channel_or_key_does_not_share_a_split() -> None:
    cache, memo = ElementCache(), SplitMemo()
    value = ["x" * 100, "y" * 100]
    split(value, cache, memo)
    key = ("t", "the value of channel 'c'", b"", False)
    assert memo.prefix(key, SERDE.dumps_typed([*value, "z" * 100]), 3, False) is not None
    for other in [
        ("u", *key[1:]),
        ("t", "the value of channel 'd'", b"", False),
        (*key[:2], b"k", False),
        (*key[:3], True),
    ]:
        assert memo.prefix(other, SERDE.dumps_typed([*value, "z" * 100]), 3, False) is None


def test_an_encrypted_channel_keeps_its_elements_ciphertexts() -> None:
    pytest.importorskip("Crypto")
    from langgraph.checkpoint.serde.encrypted import EncryptedSerializer

    serde = EncryptedSerializer.from_pycryptodome_aes(key=b"0123456789abcdef")
    cache, memo = ElementCache(), SplitMemo()
    value = ["secret " * 20, "more " * 30]
    first, whole = split(value, cache, memo, serde)
    assert whole is None, "a plaintext serialization must never be returned for storing"
    grown, _ = split([*value, "new " * 30], cache, memo, serde)
    assert grown is not None and first is not None
    assert grown.digests[:2] == first.digests
    assert all(b"secret" not in stored for stored in grown.stored.values())


def test_the_memo_stays_within_its_bound() -> None:
    cache, memo = ElementCache(), SplitMemo(max_bytes=20_000)
    for thread in range(30):
        elements.split(
            SERDE, Compression(None), ["w" * 400] * 10, cache,
            thread_id=str(thread), what="c", limit=1 << 20, memo=memo,
        )  # fmt: skip
    assert memo._size <= 20_000 and len(memo._entries) < 30


def test_two_namespaces_of_one_thread_keep_a_split_each(monkeypatch: pytest.MonkeyPatch) -> None:
    """A subgraph's messages and its parent's, put in turn, do not push each other out."""
    cache, memo = ElementCache(), SplitMemo()
    looked_up: list[bytes] = []
    by_content = cache.by_content
    monkeypatch.setattr(
        cache, "by_content", lambda plain: looked_up.append(plain) or by_content(plain)
    )
    lists: dict[str, list[str]] = {"\x00messages": [], "child:1\x00messages": []}
    for step in range(6):
        for ns_channel, value in lists.items():
            value.append(f"{ns_channel} {step} " * 20)
            looked_up.clear()
            made, _ = elements.split(
                SERDE, Compression(None), list(value), cache, thread_id="t",
                what="the value of channel 'messages'", limit=1 << 20, min_elements=1,
                memo=memo, memo_key=ns_channel,
            )  # fmt: skip
            assert made is not None and len(made.digests) == step + 1
            assert len(looked_up) == (step + 1 if step == 0 else 1), ns_channel


class _ReusedBuffer:
    """A serializer that writes every value into one bytearray it reuses (as a pooled
    encoder may): the memo must not remember what it can change afterwards."""

    def __init__(self) -> None:
        self.buffer = bytearray()

    def dumps_typed(self, value: Any) -> tuple[str, Any]:
        type_, data = SERDE.dumps_typed(value)
        self.buffer[:] = data
        return type_, self.buffer

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        return SERDE.loads_typed(data)


def test_a_serializers_reused_buffer_is_not_remembered_by_reference() -> None:
    cache, memo, reused = ElementCache(), SplitMemo(), _ReusedBuffer()
    split(["a" * 80, "b" * 80], cache, memo, serde=reused)
    # The same lengths, other bytes: the buffer now holds these two; the memo must still
    # compare against the two it split.
    with_memo, _ = split(["c" * 80, "d" * 80, "e" * 80], cache, memo, serde=reused)
    afresh, _ = split(["c" * 80, "d" * 80, "e" * 80], ElementCache(), None)
    same(with_memo, afresh)


def test_a_reused_buffer_of_the_same_length_gets_its_own_digests() -> None:
    cache, memo, reused = ElementCache(), SplitMemo(), _ReusedBuffer()
    split(["a" * 80, "b" * 80], cache, memo, serde=reused)
    with_memo, _ = split(["c" * 80, "d" * 80], cache, memo, serde=reused)  # same length
    afresh, _ = split(["c" * 80, "d" * 80], ElementCache(), None)
    same(with_memo, afresh)


def test_one_appended_entry_is_taken_whole_and_two_are_parsed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A superstep appends one message: the bytes after the remembered ones are that
    entry, not parsed again (split_memo.prefix); two appended are parsed, and both give
    the split made afresh."""
    from langgraph_durable.core import split_memo

    parsed: list[int] = []
    tail = split_memo.msgpack_tail
    monkeypatch.setattr(split_memo, "msgpack_tail", lambda *a: parsed.append(a[2]) or tail(*a))
    cache, memo = ElementCache(), SplitMemo()
    history = [HumanMessage(content="q" * 300, id=f"h{i}") for i in range(15)]
    split(history, cache, memo)
    for grown in (
        [*history, AIMessage(content="a" * 300, id="one")],  # 16: array16 from fixarray
        [*history, AIMessage(content="a" * 300, id="one"), *[AIMessage(content="b" * 300)] * 2],
    ):
        made, _ = split(grown, cache, memo)
        same(made, split(grown, ElementCache(), None)[0])
    assert parsed == [2], "one appended entry was parsed, or two were not"
