"""Shallow means one: ``ShallowRedisSaver`` and ``AsyncShallowRedisSaver`` list and return
exactly one checkpoint per thread and namespace, the newest, whatever amortized retention
has not collected yet; as langgraph-checkpoint-redis's ShallowRedisSaver (and LangGraph's
ShallowPostgresSaver) read: ``get_tuple`` ignores ``checkpoint_id``, no ``parent_config``.
"""

from __future__ import annotations

from typing import Any

import redis
from langgraph.checkpoint.base import empty_checkpoint

from langgraph_durable import AsyncShallowRedisSaver, RedisSaver, ShallowRedisSaver
from tests.helpers import graphs


def cfg(thread: str, ns: str | None = None, checkpoint_id: str | None = None) -> Any:
    conf: dict[str, Any] = {"thread_id": thread}
    if ns is not None:
        conf["checkpoint_ns"] = ns
    if checkpoint_id is not None:
        conf["checkpoint_id"] = checkpoint_id
    return {"configurable": conf}


def put_chain(saver: Any, thread: str, ns: str, count: int) -> list[str]:
    """``count`` checkpoints, each the parent of the next, written the way
    langgraph-checkpoint-redis's README writes one; their ids, oldest first."""
    config = cfg(thread, ns)
    ids = []
    for step in range(count):
        cp = empty_checkpoint()
        cp["channel_values"] = {"step": step}
        cp["channel_versions"] = {"step": f"{step + 1:05}.0.1"}
        config = saver.put(
            config, cp, {"source": "loop", "step": step}, {"step": cp["channel_versions"]["step"]}
        )
        ids.append(cp["id"])
    return ids


def test_list_and_get_tuple_show_one_checkpoint(
    redis_url: str, key_prefix: str, redis_client: redis.Redis
) -> None:
    with ShallowRedisSaver.from_conn_string(redis_url, key_prefix=key_prefix) as saver:
        ids = put_chain(saver, "t", "", 4)  # fewer than retention's collection threshold
        assert redis_client.zcard(saver.keys.thread("t").cps) == 4, "not collected yet"
        listed = list(saver.list(cfg("t")))
        assert [t.checkpoint["id"] for t in listed] == [ids[-1]]
        assert listed[0].checkpoint["channel_values"] == {"step": 3}
        assert listed[0].parent_config is None
        assert [t.checkpoint["id"] for t in saver.list(cfg("t", ""))] == [ids[-1]]
        assert [t.checkpoint["id"] for t in saver.list(None)] == [ids[-1]]
        # an older id: the one checkpoint it keeps, as the other shallow savers answer
        old = saver.get_tuple(cfg("t", "", ids[0]))
        assert old is not None and old.checkpoint["id"] == ids[-1] and old.parent_config is None
        # list's own arguments select among the one
        assert list(saver.list(cfg("t", "", ids[0]))) == []
        assert len(list(saver.list(cfg("t", "", ids[-1])))) == 1
        assert list(saver.list(cfg("t"), before=cfg("t", "", ids[-1]))) == []
        assert list(saver.list(cfg("t"), filter={"step": 0})) == []
        assert len(list(saver.list(cfg("t"), filter={"step": 3}))) == 1
        assert list(saver.list(cfg("t"), limit=0)) == []


def test_one_per_namespace_newest_first(redis_url: str, key_prefix: str) -> None:
    with ShallowRedisSaver.from_conn_string(redis_url, key_prefix=key_prefix) as saver:
        root = put_chain(saver, "t", "", 3)
        child = put_chain(saver, "t", "child:1", 3)
        listed = [(t.config["configurable"]["checkpoint_ns"], t.checkpoint["id"])
                  for t in saver.list(cfg("t"))]  # fmt: skip
        assert listed == [("child:1", child[-1]), ("", root[-1])]
        assert len(list(saver.list(cfg("t"), limit=1))) == 1
        assert [t.checkpoint["id"] for t in saver.list(cfg("t", "child:1"))] == [child[-1]]


def test_a_graph_history_is_one_state(redis_url: str, key_prefix: str) -> None:
    with ShallowRedisSaver.from_conn_string(redis_url, key_prefix=key_prefix) as saver:
        graph = graphs.counter_graph().compile(checkpointer=saver)
        for value in range(3):
            graph.invoke({"value": value, "trail": []}, cfg("g"))
        history = list(graph.get_state_history(cfg("g")))
        assert len(history) == 1 and history[0].values == graph.get_state(cfg("g")).values
    # the same data through a full saver: more than one is still stored (not collected)
    with RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix) as full:
        assert len(list(full.list(cfg("g")))) > 1


async def test_the_async_shallow_saver_shows_one_checkpoint(
    redis_url: str, key_prefix: str
) -> None:
    async with AsyncShallowRedisSaver(redis_url=redis_url, key_prefix=key_prefix) as saver:
        graph = graphs.counter_graph().compile(checkpointer=saver)
        for value in range(3):
            await graph.ainvoke({"value": value, "trail": []}, cfg("a"))
        listed = [t async for t in saver.alist(cfg("a"))]
        assert len(listed) == 1 and listed[0].parent_config is None
        history = [s async for s in graph.aget_state_history(cfg("a"))]
        assert len(history) == 1
        newest = await saver.aget_tuple(cfg("a"))
        assert newest is not None and newest.checkpoint["id"] == listed[0].checkpoint["id"]
