"""What a saver remembers of the checkpoints it wrote or read: the guess of a list page."""

from __future__ import annotations

from langgraph_durable.newest import _RECENT_FIELDS, _RECENT_THREADS, RECENT, _NewestVersions


def ids(n: int) -> list[str]:
    return [f"cp{i:04d}" for i in range(n)]  # ordered like uuid6 ids: newer is greater


def test_a_page_guesses_the_newest_remembered_below_its_cursor() -> None:
    memory = _NewestVersions()
    for i, cid in enumerate(ids(10)):
        memory.recall("t", "" if i % 2 else "sub", cid, [f"f{i}"])
    assert memory.fields("t", "", count=2) == ["f7", "f9"]
    assert memory.fields("t", "", below="cp0007", count=2) == ["f3", "f5"]
    assert memory.fields("t", None, count=3) == ["f7", "f8", "f9"]  # every namespace
    assert memory.fields("t", None, checkpoint_id="cp0004") == ["f4"]
    assert memory.fields("t", "", checkpoint_id="cp0004") == []  # not in that namespace
    assert memory.fields("other", None) == []


def test_only_the_newest_are_kept_per_namespace_and_threads_are_bounded() -> None:
    memory = _NewestVersions()
    for cid in ids(5 * RECENT):
        memory.recall("t", "", cid, [cid])
    kept = memory.fields("t", "", count=10 * RECENT)
    assert RECENT <= len(kept) <= RECENT + RECENT // 2
    assert kept == ids(5 * RECENT)[-len(kept) :]
    for n in range(_RECENT_THREADS + 1):
        memory.recall(f"thread{n}", "", "cp", ["f"])
    assert len(memory._recent) <= _RECENT_THREADS
    memory.recall("gone", "", "cp", ["f"])
    memory.forget("gone")
    assert memory.fields("gone", None) == []


def test_a_checkpoint_of_too_many_channels_is_not_remembered() -> None:
    memory = _NewestVersions()
    memory.recall("t", "", "cp1", [f"f{i}" for i in range(_RECENT_FIELDS + 1)])
    memory.recall("t", "", "cp0", ["f"])
    assert memory.fields("t", "") == ["f"]
