"""DeltaChannel history (core/delta.py), driven by hand: the walk up the parent chain a
page at a time, each channel stopping at its seed, the writes on the way oldest first,
and damage on the path raised, never skipped."""

from __future__ import annotations

from typing import Any

import pytest

from langgraph_durable.core.errors import CheckpointCorruptedError
from langgraph_durable.core.ops import Script
from langgraph_durable.core.records import LIST_PAGE, NO_VALUE
from tests.helpers.redis_keys import flipped
from tests.unit.scripted import config, drive, make_core
from tests.unit.scripted_more import Store, read_reply


def history(
    core: Any, target: str | None, channels: list[str], *script: Any
) -> tuple[Any, list[Any]]:
    return drive(core.get_delta_channel_history(config(target), channels), *script)


def line(store: Store) -> list[str]:
    """c1 seeds "messages"; c2 changed it without storing a value (a delta step); c3 is
    the checkpoint whose history is asked for. Each has pending writes."""
    c1 = store.checkpoint(1, {"messages": ["seed"]})
    store.write(c1, "t1", 0, "messages", "m1")
    store.write(c1, "t1", 1, "other", "not asked for")
    c2 = store.checkpoint(2, {"messages": NO_VALUE}, parent=c1)
    store.write(c2, "t2", 0, "messages", "m2")
    store.write(c2, "t3", 0, "messages", "m3")
    c3 = store.checkpoint(3, {"messages": NO_VALUE}, parent=c2)
    store.write(c3, "t4", 0, "messages", "the target's own: not history")
    return [c1, c2, c3]


def test_the_history_is_the_seed_and_every_write_since_oldest_first() -> None:
    core = make_core()
    store = Store(core)
    c1, c2, c3 = line(store)
    found, ops = history(
        core,
        c3,
        ["messages"],
        ("read_checkpoints", read_reply(store.entry(c3))),
        ("read_checkpoints", read_reply(store.entry(c2), store.entry(c1))),
        ("batch:HMGET", store.hmget),
    )
    assert found == {
        "messages": {
            "seed": ["seed"],
            "writes": [
                ("t1", "messages", "m1"),
                ("t2", "messages", "m2"),
                ("t3", "messages", "m3"),
            ],
        }
    }
    # the target's record only (its values the caller has), then one page of ancestors
    assert ops[0].args == ["members", store.member(c3)]
    upper, lower = core.keys.namespace_range("", c3)
    assert ops[1].args == ["range", upper, lower, LIST_PAGE]
    assert len(ops) == 3


def test_without_an_id_the_newest_checkpoint_is_the_target() -> None:
    core = make_core()
    store = Store(core)
    c1, c2, c3 = line(store)
    found, ops = history(
        core,
        None,
        ["messages"],
        ("read_checkpoints", read_reply(store.entry(c3))),
        ("read_checkpoints", read_reply(store.entry(c2), store.entry(c1))),
        ("batch:HMGET", store.hmget),
    )
    assert ops[0].args[0] == "range" and ops[0].args[-1] == 1
    assert found["messages"]["seed"] == ["seed"] and len(found["messages"]["writes"]) == 3


def test_each_channel_stops_at_its_own_seed() -> None:
    core = make_core()
    store = Store(core)
    c1 = store.checkpoint(1, {"a": ["a seed"], "b": ["b seed"]})
    store.write(c1, "t1", 0, "a", "a1")
    store.write(c1, "t1", 1, "b", "b1")
    c2 = store.checkpoint(2, {"a": ["a seeded again"], "b": NO_VALUE}, parent=c1)
    store.write(c2, "t2", 0, "a", "a2")
    store.write(c2, "t2", 1, "b", "b2")
    c3 = store.checkpoint(3, {"a": NO_VALUE, "b": NO_VALUE}, parent=c2)
    found, _ = history(
        core,
        c3,
        ["a", "b", "never written"],
        ("read_checkpoints", read_reply(store.entry(c3))),
        ("read_checkpoints", read_reply(store.entry(c2), store.entry(c1))),
        ("batch:HMGET", store.hmget),
    )
    assert found["a"] == {"seed": ["a seeded again"], "writes": [("t2", "a", "a2")]}
    assert found["b"] == {"seed": ["b seed"], "writes": [("t1", "b", "b1"), ("t2", "b", "b2")]}
    assert found["never written"] == {"writes": []}, "no seed: rebuilt from nothing"


def test_checkpoints_of_another_branch_in_the_page_are_passed_over() -> None:
    core = make_core()
    store = Store(core)
    c1 = store.checkpoint(1, {"messages": ["seed"]})
    c2 = store.checkpoint(2, {"messages": NO_VALUE}, parent=c1)
    store.write(c2, "t", 0, "messages", "on the path")
    fork = store.checkpoint(3, {"messages": ["a fork's value"]}, parent=c1)  # newer, off path
    store.write(fork, "t", 0, "messages", "another branch")
    c4 = store.checkpoint(4, {"messages": NO_VALUE}, parent=c2)
    found, ops = history(
        core,
        c4,
        ["messages"],
        ("read_checkpoints", read_reply(store.entry(c4))),
        ("read_checkpoints", read_reply(store.entry(fork), store.entry(c2), store.entry(c1))),
        ("batch:HMGET", store.hmget),
    )
    assert found["messages"] == {"seed": ["seed"], "writes": [("t", "messages", "on the path")]}
    (_, _, *asked) = ops[2].commands[0]
    assert all("00000003.0" not in f for f in asked), "the fork's value is not even read"


def test_a_chain_longer_than_a_page_reads_the_next_page_below_the_last() -> None:
    core = make_core()
    store = Store(core)
    ids = [store.checkpoint(1, {"messages": ["seed"]})]
    for step in range(2, LIST_PAGE + 3):
        ids.append(store.checkpoint(step, {"messages": NO_VALUE}, parent=ids[-1]))
        store.write(ids[-1], "t", 0, "messages", step)
    target = ids[-1]
    ancestors = [store.entry(c) for c in reversed(ids[:-1])]  # newest first
    found, ops = history(
        core,
        target,
        ["messages"],
        ("read_checkpoints", read_reply(store.entry(target))),
        ("read_checkpoints", read_reply(*ancestors[:LIST_PAGE])),
        ("batch:HMGET", store.hmget),
        ("read_checkpoints", read_reply(*ancestors[LIST_PAGE:])),
        ("batch:HMGET", store.hmget),
    )
    pages = [op for op in ops if isinstance(op, Script)][1:]
    last_of_first_page = ids[-1 - LIST_PAGE]
    assert pages[1].args[1] == core.keys.namespace_range("", last_of_first_page)[0]
    assert found["messages"]["seed"] == ["seed"]
    assert [w[2] for w in found["messages"]["writes"]] == list(range(2, LIST_PAGE + 2))


def test_a_damaged_ancestor_on_the_path_raises() -> None:
    core = make_core()
    store = Store(core)
    c1, c2, c3 = line(store)
    with pytest.raises(
        CheckpointCorruptedError, match="an ancestor DeltaChannel history needs"
    ) as e:
        history(
            core,
            c3,
            ["messages"],
            ("read_checkpoints", read_reply(store.entry(c3))),
            (
                "read_checkpoints",
                read_reply(
                    store.entry(c2, record=flipped(store.cp[store.member(c2)])), store.entry(c1)
                ),
            ),
        )
    assert e.value.checkpoint_id == c2


def test_a_damaged_write_on_the_path_raises_rather_than_leave_a_hole() -> None:
    core = make_core()
    store = Store(core)
    c1, c2, c3 = line(store)
    member = min(w for w in store.wr if c2 in w)
    store.wr[member] = flipped(store.wr[member])
    with pytest.raises(CheckpointCorruptedError) as e:
        history(
            core,
            c3,
            ["messages"],
            ("read_checkpoints", read_reply(store.entry(c3))),
            ("read_checkpoints", read_reply(store.entry(c2), store.entry(c1))),
            ("batch:HMGET", store.hmget),
        )
    assert e.value.checkpoint_id == c2 and e.value.key == store.tk.wr
    assert "checksum mismatch" in e.value.reason


def test_a_damaged_seed_raises_and_a_seed_never_stored_is_passed() -> None:
    core = make_core()
    store = Store(core)
    c1, c2, c3 = line(store)
    seed = store.fields_of(c1)[0]
    script = [
        ("read_checkpoints", read_reply(store.entry(c3))),
        ("read_checkpoints", read_reply(store.entry(c2), store.entry(c1))),
        ("batch:HMGET", store.hmget),
    ]
    store.bl[seed] = flipped(store.bl[seed])
    with pytest.raises(CheckpointCorruptedError) as e:
        history(core, c3, ["messages"], *script)
    assert e.value.key == store.tk.bl and "channel value 'messages'" in e.value.reason
    del store.bl[seed]  # never stored: no seed here, and none further up
    found, _ = history(core, c3, ["messages"], *script)
    assert "seed" not in found["messages"] and len(found["messages"]["writes"]) == 3


def test_a_seed_whose_element_is_gone_raises() -> None:
    store = Store(make_core())  # the writer's process holds the elements it wrote...
    core = make_core()  # ...another reads them from Redis
    c1 = store.checkpoint(1, {"messages": ["x" * 100, "y" * 100]})
    c2 = store.checkpoint(2, {"messages": NO_VALUE}, parent=c1)
    gone = min(store.el)
    del store.el[gone]
    with pytest.raises(CheckpointCorruptedError) as e:
        history(
            core,
            c2,
            ["messages"],
            ("read_checkpoints", read_reply(store.entry(c2))),
            ("read_checkpoints", read_reply(store.entry(c1))),
            ("batch:HMGET", store.hmget),  # the manifest
            ("batch:HMGET", store.hmget),  # the elements it names
        )
    assert e.value.key == store.tk.el and gone.hex() in e.value.reason


def test_no_channels_no_round_trip_and_a_root_has_no_history() -> None:
    core = make_core()
    store = Store(core)
    only = store.checkpoint(1, {"messages": ["seed"]})
    assert drive(core.get_delta_channel_history(config(only), []))[1] == []
    found, ops = history(
        core, only, ["messages"], ("read_checkpoints", read_reply(store.entry(only)))
    )
    assert found == {"messages": {"writes": []}} and len(ops) == 1
    # a target not stored (deleted meanwhile): nothing to walk from
    found, _ = history(
        core,
        "1ef00009-0000-6000-8000-000000000000",
        ["messages"],
        ("read_checkpoints", read_reply([store.member(only).encode(), None, [], 0])),
    )
    assert found == {"messages": {"writes": []}}


def test_a_damaged_target_raises() -> None:
    core = make_core()
    store = Store(core)
    _c1, _c2, c3 = line(store)
    with pytest.raises(CheckpointCorruptedError) as e:
        history(
            core,
            c3,
            ["messages"],
            ("read_checkpoints", read_reply(store.entry(c3, record=b"garbage"))),
        )
    assert e.value.checkpoint_id == c3
