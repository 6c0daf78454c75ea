"""The put's window of elements named without sending (element_window.py): which it
reads, in which commands, and what their replies say. No server: replies by hand."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from langgraph_durable.core.element_cache import ElementCache
from langgraph_durable.core.element_window import (
    CHECKED_PER_PUT,
    FETCHED_MAX,
    HEADS_SORTED_BY_INDEX,
    Window,
    unsent_window,
)
from langgraph_durable.core.manifests import every_digest


def digest(i: int) -> bytes:
    return b"%016d" % i


def known_cache(sizes: dict[int, int]) -> ElementCache:
    cache = ElementCache()
    for i, size in sizes.items():
        cache.note_stored(digest(i), b"x" * size)
    return cache


def test_by_length_the_script_gets_nothing_and_the_window_reads_outside_it() -> None:
    n = 3 * CHECKED_PER_PUT
    cache = known_cache({i: 100 for i in range(n)} | {1: FETCHED_MAX + 1})
    arg, window, checked_next = unsent_window(
        {"messages": tuple(digest(i) for i in range(n))}, [], cache, False, 0
    )
    assert arg == b""  # nothing named goes into the script's Lua
    assert window is not None and checked_next == CHECKED_PER_PUT
    assert [d for d, _ in window.fetched] == [digest(i) for i in range(CHECKED_PER_PUT) if i != 1]
    assert window.by_length == ((digest(1), FETCHED_MAX + 1),)
    assert window.rest == tuple(digest(i) for i in range(CHECKED_PER_PUT, n))
    assert window.commands("el", "qt") == [
        ("HMGET", "el", *(d for d, _ in window.fetched)),
        ("HSTRLEN", "el", digest(1)),
        ("EXISTS", "qt"),
    ]


def test_the_next_put_checks_where_this_one_left_off_and_wraps_around() -> None:
    n = CHECKED_PER_PUT + 3
    named = {"messages": tuple(digest(i) for i in range(n))}
    cache = known_cache({i: 10 for i in range(n)})
    _, window, checked_next = unsent_window(named, [], cache, False, CHECKED_PER_PUT)
    assert window is not None
    assert [d for d, _ in window.fetched] == [
        digest(i % n) for i in range(CHECKED_PER_PUT, 2 * CHECKED_PER_PUT)
    ]
    assert checked_next == 2 * CHECKED_PER_PUT


def test_what_the_replies_say() -> None:
    window = Window(((digest(0), 3), (digest(1), 4)), ((digest(2), 9), (digest(3), None)))
    assert window.finding([[b"abc", b"abcd"], 9, 1]) is None
    assert window.finding([[b"abc", None], 9, 1]) == "missing"
    assert window.finding([[b"abc", b"abcde"], 9, 1]) == "damaged"  # extended
    assert window.finding([[b"ab", b"abcd"], 9, 1]) == "damaged"  # truncated
    assert window.finding([[b"ab", None], 9, 1]) == "damaged"  # the first one found so
    assert window.finding([[None, b"abcde"], 9, 1]) == "missing"
    with pytest.raises(ValueError):  # not a reply to these reads
        window.finding([[b"abc"], 9, 1])
    assert window.finding([[b"abc", b"abcd"], 8, 1]) == "damaged"
    assert window.finding([[b"abc", b"abcd"], 0, 1]) == "missing"
    assert window.finding([[b"abc", b"abcd"], 9, 0]) == "missing"  # length unknown: there
    # an error reply (a hash of the wrong type) proves nothing: the script finds it
    assert window.finding([Exception("WRONGTYPE"), Exception("WRONGTYPE"), 1]) is None


def test_while_the_quarantine_holds_anything_the_rest_is_checked_too() -> None:
    cache = known_cache({5: 7})
    window = Window(((digest(0), 3),), (), (digest(5), digest(6)), watch=True)
    assert window.commands("el", "qt")[-1] == ("EXISTS", "qt")
    assert window.finding([[b"abc"], 0]) is None and not window.quarantined([[b"abc"], 0])
    assert window.finding([[b"abc"], 1]) == "unchecked" and window.quarantined([[b"abc"], 1])
    others = window.of_rest(cache)
    assert others.commands("el", "qt") == [
        ("HSTRLEN", "el", digest(5)),
        ("HSTRLEN", "el", digest(6)),
    ]
    assert others.finding([7, 12]) is None  # digest(6): never held here, only there counts
    assert others.finding([6, 12]) == "damaged"
    assert others.finding([7, 0]) == "missing"


def test_once_a_put_saw_the_quarantine_hold_anything_the_next_checks_all_in_its_round_trip() -> (
    None
):
    """No second round trip per put while a quarantine stays: the put after the one that
    saw it checks every element it names (HSTRLEN, no bytes) in its own round trip, and
    still reads the quarantine, to notice when it is emptied."""
    n = 2 * CHECKED_PER_PUT
    named = {"messages": tuple(digest(i) for i in range(n))}
    cache = known_cache({i: 10 for i in range(n)})
    _, window, _ = unsent_window(named, [], cache, False, 0, check_all=True)
    assert window is not None and window.rest == () and window.watch
    assert [d for d, _ in window.by_length] == [digest(i) for i in range(CHECKED_PER_PUT, n)]
    replies = [[b"x" * 10] * CHECKED_PER_PUT, *[10] * CHECKED_PER_PUT, 1]
    assert window.finding(replies) is None and window.quarantined(replies)
    replies[CHECKED_PER_PUT] = 9  # the last element, truncated
    assert window.finding(replies) == "damaged"


def test_by_bytes_the_script_checks_them_all() -> None:
    cache = known_cache({0: 5})
    arg, window, _ = unsent_window({"messages": (digest(0), digest(1))}, [], cache, True, 0)
    assert window is None
    assert arg.startswith(b"s1:") and arg.endswith(digest(1))


def _window_as_specified(manifests, sent, cache, checked_from, first, check_all):  # type: ignore[no-untyped-def]
    """The window as its docstring states it, walked element by element: what the put's
    window, computed in C where it is O(n), must equal."""
    sending = {d for d, _ in sent}
    named = []
    for channel in sorted(manifests):
        for d in every_digest(manifests[channel]):
            if d not in named and d not in sending:
                named.append(d)
    if not named:
        return None, 0
    heads = [d for d in named if d in first]
    others = [d for d in named if d not in first]
    start = checked_from % len(others) if others else 0
    size = 2 * len(heads) + CHECKED_PER_PUT + len(sent)
    rotated = heads + others[start:] + others[:start]
    window, rest = rotated[:size], rotated[size:]
    known = {d: cache.known_as_stored(d) for d in rotated}
    fetched = tuple((d, known[d][0]) for d in window if known[d] and known[d][0] <= FETCHED_MAX)
    by_length = [(d, known[d][0] if known[d] else None) for d in window]
    by_length = [(d, n) for d, n in by_length if (d, n) not in fetched]
    if check_all and rest:
        by_length += [(d, known[d][0] if known[d] else None) for d in rest]
        return Window(fetched, tuple(by_length), (), watch=True), start + len(window) - len(heads)
    checked_next = start + len(window) - len(heads)
    return Window(fetched, tuple(by_length), tuple(rest), watch=bool(rest)), checked_next


@settings(max_examples=300, deadline=None)
@given(
    lists=st.lists(st.lists(st.integers(0, 40), max_size=30), min_size=1, max_size=3),
    sent=st.lists(st.integers(0, 40), max_size=4, unique=True),
    first=st.frozensets(st.integers(0, 40), max_size=20),  # beyond HEADS_SORTED_BY_INDEX too
    known=st.dictionaries(st.integers(0, 40), st.sampled_from([1, 10, FETCHED_MAX + 1])),
    checked_from=st.integers(0, 100),
    check_all=st.booleans(),
)
def test_the_window_is_the_one_its_docstring_states(  # type: ignore[no-untyped-def]
    lists, sent, first, known, checked_from, check_all
) -> None:
    """Names repeated across and within channels, elements sent, heads the parent's writes
    stored (some not named at all), elements never held here: the same window."""
    manifests = {f"c{i}": tuple(digest(n) for n in values) for i, values in enumerate(lists)}
    cache = known_cache(known)
    sent_ = [(digest(n), b"") for n in sent]
    first_ = frozenset(digest(n) for n in first)
    arg, window, checked_next = unsent_window(
        manifests, sent_, cache, False, checked_from, first_, check_all
    )
    assert arg == b""
    assert (window, checked_next) == _window_as_specified(
        manifests, sent_, cache, checked_from, first_, check_all
    )


@pytest.mark.parametrize("heads", [2, HEADS_SORTED_BY_INDEX, HEADS_SORTED_BY_INDEX + 5])
def test_the_elements_the_parents_writes_stored_come_first_in_the_manifests_order(
    heads: int,
) -> None:
    """Found by a search each when few, by one pass over the named ones when many: the
    same order either way, whatever order the set of them iterates in."""
    n = 40
    named = {"messages": tuple(digest(i) for i in range(n))}
    cache = known_cache({i: 10 for i in range(n)})
    first = frozenset(digest(i) for i in range(n - 1, n - 1 - 2 * heads, -2))  # every other
    assert len(first) == heads
    _, window, _ = unsent_window(named, [], cache, False, 0, first)
    assert window is not None
    expected = sorted(first) + [d for d in named["messages"] if d not in first]
    assert [d for d, _ in window.fetched] == expected[: 2 * heads + CHECKED_PER_PUT]


def test_only_a_saver_that_checks_by_bytes_hashes_what_it_stored() -> None:
    import hashlib

    from langgraph_durable.core.context import PlanContext
    from langgraph_durable.core.envelope import Envelope
    from langgraph_durable.core.keys import KeySchema

    stored = b"msgpack\x00" + b"x" * 100
    sha1 = hashlib.sha1(stored).hexdigest()[:15].encode()
    for by_bytes, fingerprint in ((False, digest(0)), (True, digest(0) + sha1)):
        ctx = PlanContext(
            serde=None,  # type: ignore[arg-type]
            keys=KeySchema("t"),
            envelope=Envelope(),
            ttl=None,
            verify_elements_on_write=by_bytes,
        )
        ctx.element_cache.note_stored(digest(0), stored)
        assert ctx.element_cache.known_as_stored(digest(0)) == (len(stored), fingerprint)
