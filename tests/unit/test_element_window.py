"""The put's window of elements named without sending (element_window.py): which it
reads, in which commands, and what their replies say. No server: replies by hand."""

from __future__ import annotations

from langgraph_durable.core.element_cache import ElementCache
from langgraph_durable.core.element_window import (
    CHECKED_PER_PUT,
    FETCHED_MAX,
    Window,
    unsent_window,
)


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
