"""Every key a thread owns expires with it (``ttl``) and goes with it (``delete_thread``):
after a copy (sync and async, as LangGraph Server copies threads), after a put refused
because the thread was deleted during its run, and after a rollback."""

from __future__ import annotations

from typing import Any

import pytest
import redis
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.types import Command

from langgraph_durable import AsyncRedisSaver, RedisSaver
from langgraph_durable.core.errors import DurableError
from tests.helpers import graphs

TTL = 600


def config(thread_id: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread_id}}


def thread_keys(saver: Any, client: redis.Redis, thread_id: str) -> list[str]:
    tk = saver.keys.thread(thread_id)
    return [k for k in tk.with_twins() if client.exists(k)]


def assert_all_expire(saver: Any, client: redis.Redis, thread_id: str) -> None:
    keys = thread_keys(saver, client, thread_id)
    assert keys, "the thread has keys"
    lasting = [k for k in keys if not 0 < client.ttl(k) <= TTL]
    assert not lasting, f"keys of {thread_id!r} that never expire: {lasting}"


def run_messages(saver: Any, thread_id: str) -> None:
    graph = graphs.react_graph(rounds=2).compile(checkpointer=saver)
    graph.invoke(graphs.react_input(), config(thread_id))


def test_a_copy_expires_as_its_source_does(
    redis_url: str, key_prefix: str, redis_client: redis.Redis
) -> None:
    with RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix, ttl=TTL) as saver:
        run_messages(saver, "source")
        assert_all_expire(saver, redis_client, "source")
        saver.copy_thread("source", "copy")
        assert_all_expire(saver, redis_client, "copy")
        # a thread waiting on an interrupt() keeps its keys until answered; so does its copy
        graph = graphs.approval_graph().compile(checkpointer=saver)
        graph.invoke({"request": "r", "decision": ""}, config("waiting"))
        assert redis_client.ttl(saver.keys.thread("waiting").cp) == -1
        saver.copy_thread("waiting", "waiting-copy")
        assert redis_client.ttl(saver.keys.thread("waiting-copy").cp) == -1
        graph.invoke(Command(resume="yes"), config("waiting-copy"))
        assert_all_expire(saver, redis_client, "waiting-copy")


async def test_an_async_copy_expires_as_its_source_does(
    redis_url: str, key_prefix: str, redis_client: redis.Redis
) -> None:
    async with AsyncRedisSaver.from_conn_string(redis_url, key_prefix=key_prefix, ttl=TTL) as s:
        graph = graphs.react_graph(rounds=2).compile(checkpointer=s)
        await graph.ainvoke(graphs.react_input(), config("source"))
        await s.acopy_thread("source", "copy")
        assert_all_expire(s, redis_client, "copy")


class DeletedBeforeItsPut(RedisSaver):
    """The server deletes the thread (DELETE /threads) just before a step's checkpoint."""

    doomed_step = 1

    def put(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        if metadata.get("step") == self.doomed_step:
            self.delete_thread(config["configurable"]["thread_id"])
        return super().put(config, checkpoint, metadata, new_versions)


def test_a_graph_whose_thread_is_deleted_mid_run_leaves_no_lasting_key(
    redis_url: str, key_prefix: str, redis_client: redis.Redis
) -> None:
    """The step's put is refused (its parent is gone). Its task's pending writes may land
    after the deletion (LangGraph writes them from another thread), and are kept as
    InMemorySaver keeps them; nothing is left without the thread's ttl."""
    with DeletedBeforeItsPut.from_conn_string(redis_url, key_prefix=key_prefix, ttl=TTL) as saver:

        def answer(state: graphs.MessagesState) -> dict[str, Any]:
            return {"messages": [AIMessage("one " * 50, id="a1")]}

        graph = graphs.chain(graphs.MessagesState, ("answer", answer)).compile(checkpointer=saver)
        with pytest.raises(DurableError):
            graph.invoke({"messages": [HumanMessage("hi", id="h")]}, config("gone"))
        assert saver.get_tuple(config("gone")) is None
        lasting = [k for k in thread_keys(saver, redis_client, "gone") if redis_client.ttl(k) < 0]
        assert not lasting, lasting


@pytest.mark.parametrize("ttl", [TTL, None])
def test_a_put_refused_because_its_thread_was_deleted_leaves_no_key(
    redis_url: str, key_prefix: str, redis_client: redis.Redis, ttl: int | None
) -> None:
    """The put's new elements go ahead of its script; refused, they do not stay behind
    with no expiry and no checkpoint to name them."""
    from langgraph.checkpoint.base import empty_checkpoint

    with RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix, ttl=ttl) as saver:
        messages = [AIMessage(f"message {i} " * 20, id=f"m{i}") for i in range(3)]
        cp = empty_checkpoint()
        version = saver.get_next_version(None, None)
        cp["channel_values"] = {"messages": messages[:2]}
        cp["channel_versions"] = {"messages": version}
        first = saver.put(
            {"configurable": {"thread_id": "gone", "checkpoint_ns": ""}},
            cp,
            {"source": "loop", "step": 0},
            {"messages": version},
        )
        saver.delete_thread("gone")  # DELETE /threads while the run goes on
        cp = empty_checkpoint()
        version = saver.get_next_version(version, None)
        cp["channel_values"] = {"messages": messages}
        cp["channel_versions"] = {"messages": version}
        with pytest.raises(DurableError):
            saver.put(first, cp, {"source": "loop", "step": 1}, {"messages": version})
        left = thread_keys(saver, redis_client, "gone")
        assert not left, f"keys of a deleted thread came back: {left}"


@pytest.mark.parametrize("ttl", [TTL, None])
def test_a_rolled_back_run_leaves_no_index_entry_once_its_thread_is_deleted(
    redis_url: str, key_prefix: str, redis_client: redis.Redis, ttl: int | None
) -> None:
    with RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix, ttl=ttl) as saver:
        graph = graphs.react_graph(rounds=1).compile(checkpointer=saver)
        cfg = {"configurable": {"thread_id": "t", "run_id": "r1"}}
        graph.invoke(graphs.react_input(), cfg)
        run_set = saver.keys.run("r1")
        assert redis_client.smembers(run_set) == {b"t"}
        if ttl:
            assert 0 < redis_client.ttl(run_set) <= ttl
        saver.delete_for_runs(["r1"])
        saver.delete_thread("t")
        assert not redis_client.exists(run_set), "the run's index set outlived its thread"
        assert not thread_keys(saver, redis_client, "t")
