"""What a saver remembers of the last checkpoints it saw: the guess of a list page."""

from __future__ import annotations

from langgraph_durable.core.recent import _FIELDS, _NAMESPACES, _THREADS, RECENT, RecentFields


def ids(n: int) -> list[str]:
    return [f"cp{i:04d}" for i in range(n)]  # ordered like uuid6 ids: newer is greater


def test_a_page_guesses_what_continues_what_the_saver_saw() -> None:
    memory = RecentFields()
    for i, cid in enumerate(ids(10)):
        memory.recall("t", "" if i % 2 else "sub", cid, [f"f{i}"])
    # From the top: only when the newest remembered is the newest the saver knows.
    assert memory.fields("t", "", newest="cp0009", count=2) == ["f7", "f9"]
    assert memory.fields("t", "", newest="cp0011", count=2) == []  # written elsewhere
    assert memory.fields("t", None, newest="cp0009", count=3) == ["f7", "f8", "f9"]
    # Below a cursor: only below one it remembers.
    assert memory.fields("t", "", below="cp0007", count=2) == ["f3", "f5"]
    assert memory.fields("t", "", below="cp0006", count=2) == []  # not of that namespace
    assert memory.fields("t", None, below="cp0006", count=2) == ["f4", "f5"]
    assert memory.of("t", "sub", "cp0004") == ["f4"]
    assert memory.of("t", "", "cp0004") == []  # not in that namespace
    assert memory.fields("other", None, newest="cp0009") == []


def test_the_window_stays_the_newest_seen_after_a_walk_through_older_pages() -> None:
    memory = RecentFields()
    every = ids(10 * RECENT)
    for cid in every[-2 * RECENT :]:  # two pages read from the top, newest first
        memory.recall("t", "", cid, [cid])
    for cid in every[: -2 * RECENT]:  # then the older pages
        memory.recall("t", "", cid, [cid])
    kept = memory.fields("t", "", newest=every[-1], count=10 * RECENT)
    assert RECENT <= len(kept) <= RECENT + RECENT // 2
    assert kept == every[-len(kept) :]
    # A page in the middle is not guessed from the tail of the walk.
    assert memory.fields("t", "", below=every[5 * RECENT], count=10) == []


def test_threads_namespaces_channels_and_bytes_are_bounded() -> None:
    memory = RecentFields()
    for n in range(_THREADS + 1):
        memory.recall(f"thread{n}", "", "cp", ["f"])
    assert len(memory._threads) <= _THREADS
    memory.recall("t", "", "root", ["f"])
    for n in range(3 * _NAMESPACES):  # subgraph namespaces: new on every call
        memory.recall("t", f"node:{n}", "cp", ["f"])
    assert len(memory._threads["t"]) == _NAMESPACES
    assert memory.of("t", f"node:{3 * _NAMESPACES - 1}", "cp") == ["f"]
    assert memory.of("t", "", "root") == ["f"]  # the root namespace is never evicted
    memory.recall("t", "", "cp1", [f"f{i}" for i in range(_FIELDS + 1)])
    assert memory.of("t", "", "cp1") == []
    big = "x" * (1 << 20)
    for n in range(20):  # 20 MB of fields: emptied whole, not kept
        memory.recall("t", "", f"cp{n:02d}", [big])
    assert memory._bytes <= 8 << 20
    memory.recall("gone", "", "cp", ["f"])
    memory.forget("gone")
    assert memory.of("gone", "", "cp") == []


def test_the_byte_count_follows_what_is_kept() -> None:
    memory = RecentFields()
    for _ in range(3):  # read again: counted once
        for cid in ids(5 * RECENT):
            memory.recall("t", "", cid, ["x" * 100])
    kept = memory._threads["t"][""].size()
    assert memory._bytes == kept < 5 * RECENT * 106
    for n in range(2 * _NAMESPACES):
        memory.recall("t", f"node:{n}", "cp", ["y" * 100])
    assert memory._bytes == sum(w.size() for w in memory._threads["t"].values())
    memory.forget("t")
    assert memory._bytes == 0
