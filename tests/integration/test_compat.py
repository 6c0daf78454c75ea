"""langgraph-checkpoint-redis's call shapes on a real Redis, with real compiled graphs:
``redis_url=`` / ``redis_client=`` / ``connection_args=``, its ``ttl`` dict and
``refresh_on_read`` (a thread waiting on a human outlives its ttl while it is read), the
savers as (async) context managers, ``prune(keep_last=)``, the shallow savers, and
``redis+sentinel://`` URLs through a real sentinel."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import AsyncExitStack, contextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import pytest
import redis
import redis.asyncio
from langgraph.types import Command
from redis.backoff import NoBackoff
from redis.retry import Retry
from redis.sentinel import MasterNotFoundError

from langgraph_durable import (
    AsyncRedisSaver,
    ConfigurationError,
    RedisSaver,
    ShallowRedisSaver,
)
from tests.helpers import graphs
from tests.helpers.redis_keys import delete_prefix
from tests.helpers.servers import Server, start_sentinel, start_server


def config(thread: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread}}


def connection_names(client: redis.Redis) -> list[str]:
    return [c.get("name", "") for c in client.client_list()]


def wait_until_gone(client: redis.Redis, name: str) -> None:
    """Until the server has dropped every connection named ``name`` (it notices a closed
    socket on its next event loop turn)."""
    deadline = time.monotonic() + 30
    while name in connection_names(client):
        assert time.monotonic() < deadline, f"connection {name!r} still open"
        time.sleep(0.01)


# -- where the client comes from ----------------------------------------------------------
@pytest.mark.parametrize("shape", ["RedisSaver(url)", "RedisSaver(redis_url=url)"])
def test_a_saver_made_from_a_url_runs_a_graph_and_closes_its_client(
    redis_url: str, key_prefix: str, redis_client: redis.Redis, shape: str
) -> None:
    name = f"lgd-compat-{uuid.uuid4().hex[:8]}"
    args: dict[str, Any] = {"connection_args": {"client_name": name}, "key_prefix": key_prefix}
    made = (
        RedisSaver(redis_url, **args)
        if shape == "RedisSaver(url)"
        else RedisSaver(redis_url=redis_url, **args)
    )
    with made as saver:
        graph = graphs.counter_graph().compile(checkpointer=saver)
        assert graph.invoke({"value": 1, "trail": []}, config("t"))["value"] == 17
        assert name in connection_names(redis_client)  # connection_args reached redis-py
    wait_until_gone(redis_client, name)
    with RedisSaver(redis_url=redis_url, key_prefix=key_prefix) as again:
        assert again.get_tuple(config("t")).checkpoint["channel_values"]["value"] == 17


def test_a_handed_in_client_stays_open(
    redis_url: str, key_prefix: str, redis_client: redis.Redis
) -> None:
    name = f"lgd-compat-{uuid.uuid4().hex[:8]}"
    mine = redis.Redis.from_url(redis_url, client_name=name)
    with RedisSaver(redis_client=mine, key_prefix=key_prefix) as saver:
        graphs.counter_graph().compile(checkpointer=saver).invoke(
            {"value": 0, "trail": []}, config("t")
        )
    with RedisSaver.from_conn_string(redis_client=mine, key_prefix=key_prefix) as saver:
        assert saver.get_tuple(config("t")) is not None
    assert mine.ping()
    assert name in connection_names(redis_client)
    mine.close()


def test_from_conn_string_takes_redis_url_connection_args_and_the_ttl_dict(
    redis_url: str, key_prefix: str, redis_client: redis.Redis
) -> None:
    name = f"lgd-compat-{uuid.uuid4().hex[:8]}"
    with RedisSaver.from_conn_string(
        redis_url=redis_url,
        connection_args={"client_name": name},
        socket_timeout=30,  # a keyword joins connection_args
        ttl={"default_ttl": 2, "refresh_on_read": True},  # minutes
        checkpoint_prefix=key_prefix,  # its name for key_prefix
    ) as saver:
        assert (saver.ttl, saver.refresh_on_read, saver.key_prefix) == (120, True, key_prefix)
        assert saver.client.connection_pool.connection_kwargs["socket_timeout"] == 30
        assert name in connection_names(redis_client)
        graphs.counter_graph().compile(checkpointer=saver).invoke(
            {"value": 0, "trail": []}, config("t")
        )
        pttl = redis_client.pttl(saver.keys.thread("t").cp)
        assert 0 < pttl <= 120_000


@pytest.mark.parametrize(
    "make, named",
    [
        (lambda url, c: RedisSaver(), "exactly one.*got none"),
        (lambda url, c: RedisSaver(url, redis_url=url), "first argument and redis_url"),
        (lambda url, c: RedisSaver(redis_url=url, redis_client=c), "redis_url and redis_client"),
        (
            lambda url, c: RedisSaver(redis_client=c, connection_args={"socket_timeout": 1}),
            "connection_args \\(socket_timeout\\) only configure",
        ),
        (lambda url, c: RedisSaver(c, cluster=True), "cluster=True, but the client is a Redis"),
        (
            lambda url, c: AsyncRedisSaver(redis.asyncio.Redis.from_url(url), max_connections=5),
            "max_connections only configure",
        ),
        (lambda url, c: RedisSaver(url, connection_args={"sockettimeout": 1}), "'sockettimeout'"),
        (lambda url, c: RedisSaver(url, connection_args=[("db", 1)]), "connection_args must"),
        (lambda url, c: RedisSaver(redis_url=""), "URL must be a non-empty str, got ''"),
        (lambda url, c: RedisSaver(url, checkpoint_write_prefix="w"), "checkpoint_write_prefix"),
        (lambda url, c: RedisSaver(url, ttl={"default_ttl": 1, "sweep": 1}), "'sweep'"),
        (lambda url, c: RedisSaver(url, refresh_on_read=True), "needs a ttl"),
        (
            lambda url, c: RedisSaver(url, ttl=5, refresh_on_read=True, repair_on_read=False),
            "choose one",
        ),
        (lambda url, c: ShallowRedisSaver(url, keep_last=3), "keep_last=1"),
        (
            lambda url, c: RedisSaver.from_conn_string(
                url, connection_args={"db": 0}, db=0
            ).__enter__(),
            "'db' given both",
        ),
    ],
)
def test_bad_call_shapes_are_configuration_errors_naming_what_is_wrong(
    redis_url: str, redis_client: redis.Redis, make: Any, named: str
) -> None:
    with pytest.raises(ConfigurationError, match=named):
        make(redis_url, redis_client)


# -- async ----------------------------------------------------------------------------------
async def test_async_with_an_async_saver_made_from_a_url(
    redis_url: str, key_prefix: str, redis_client: redis.Redis
) -> None:
    name = f"lgd-compat-{uuid.uuid4().hex[:8]}"
    async with AsyncRedisSaver(
        redis_url=redis_url, connection_args={"client_name": name}, key_prefix=key_prefix
    ) as saver:
        await saver.setup()  # langgraph-checkpoint-redis's async setup shape, again
        graph = graphs.counter_graph().compile(checkpointer=saver)
        assert (await graph.ainvoke({"value": 1, "trail": []}, config("t")))["value"] == 17
        assert name in connection_names(redis_client)
    wait_until_gone(redis_client, name)
    async with AsyncRedisSaver.from_conn_string(
        redis_url=redis_url, key_prefix=key_prefix, ttl={"default_ttl": 1}
    ) as again:
        assert again.ttl == 60
        reader = graphs.counter_graph().compile(checkpointer=again)
        state = await reader.aget_state(config("t"))
        assert state.values["value"] == 17


def test_an_async_saver_made_outside_a_loop_is_bound_by_async_with(
    redis_url: str, key_prefix: str
) -> None:
    saver = AsyncRedisSaver(redis_url, key_prefix=key_prefix)
    assert saver.loop is None

    async def run() -> Any:
        async with saver:
            graph = graphs.counter_graph().compile(checkpointer=saver)
            return await graph.ainvoke({"value": 2, "trail": []}, config("t"))

    assert asyncio.run(run())["value"] == 27


# -- prune(keep_last=) and the shallow savers ----------------------------------------------
def checkpoints(saver: Any, thread: str) -> int:
    return len(list(saver.list(config(thread))))


def test_prune_keeps_the_last_n(redis_url: str, key_prefix: str) -> None:
    with RedisSaver(redis_url=redis_url, key_prefix=key_prefix) as saver:
        graph = graphs.counter_graph().compile(checkpointer=saver)
        for thread in ("three", "one", "gone", "strategy"):
            for value in range(3):
                graph.invoke({"value": value, "trail": []}, config(thread))
            assert checkpoints(saver, thread) == 15  # 5 per invoke
        saver.prune(["three"], keep_last=3)
        saver.prune(["one"])  # keep_latest
        saver.prune(["gone"], keep_last=0)
        saver.prune(["strategy"], strategy="delete", keep_last=2)  # keep_last wins
        assert [checkpoints(saver, t) for t in ("three", "one", "gone", "strategy")] == [3, 1, 0, 2]
        newest = saver.get_tuple(config("three"))
        assert [c.checkpoint["id"] for c in saver.list(config("three"), limit=1)] == [
            newest.checkpoint["id"]
        ]
        assert graph.get_state(config("one")).values["value"] == 27


async def test_aprune_keeps_the_last_n(redis_url: str, key_prefix: str) -> None:
    async with AsyncRedisSaver(redis_url, key_prefix=key_prefix) as saver:
        graph = graphs.counter_graph().compile(checkpointer=saver)
        for value in range(2):
            await graph.ainvoke({"value": value, "trail": []}, config("t"))
        await saver.aprune(["t"], keep_last=4)
        assert len([c async for c in saver.alist(config("t"))]) == 4


def test_the_shallow_saver_keeps_the_newest_checkpoint(redis_url: str, key_prefix: str) -> None:
    with ShallowRedisSaver.from_conn_string(
        redis_url, key_prefix=key_prefix, key_cache_max_size=10, channel_cache_max_size=10
    ) as saver:  # its cache sizes are taken (there is no such cache here)
        assert saver.keep_last == 1
        graph = graphs.counter_graph().compile(checkpointer=saver)
        for value in range(6):
            graph.invoke({"value": value, "trail": []}, config("t"))
        # collected as the thread grows (every few puts); one is all it ever lists
        assert checkpoints(saver, "t") == 1
        saver.prune(["t"])
        assert checkpoints(saver, "t") == 1
        assert graph.get_state(config("t")).values["value"] == 57


# -- refresh_on_read: a human can take their time -----------------------------------------
TTL_SECONDS = 3


@pytest.mark.parametrize("shape", ["sync, ttl dict in minutes", "async, ttl seconds + option"])
async def test_a_thread_that_is_read_outlives_its_ttl(
    redis_url: str, key_prefix: str, redis_client: redis.Redis, shape: str
) -> None:
    """Only read (``get_state``) for twice the ttl: every read gives the thread's keys
    their ttl again. A thread written beside it by a saver without ``refresh_on_read``
    and never read has expired by then. The sleeps are the ttl running down, the
    behaviour under test; each read is checked to have reset the ttl, not raced against
    the expiry."""
    sync = shape.startswith("sync")
    async with AsyncExitStack() as stack:
        if sync:
            saver: Any = stack.enter_context(
                RedisSaver(
                    redis_url=redis_url,
                    key_prefix=key_prefix,
                    ttl={"default_ttl": TTL_SECONDS / 60, "refresh_on_read": True},
                )
            )
        else:
            saver = await stack.enter_async_context(
                AsyncRedisSaver(
                    redis_url, key_prefix=key_prefix, ttl=TTL_SECONDS, refresh_on_read=True
                )
            )
        forgetting = stack.enter_context(
            RedisSaver(redis_url=redis_url, key_prefix=key_prefix, ttl=TTL_SECONDS)
        )
        assert saver.ttl == TTL_SECONDS
        graph = graphs.react_graph(rounds=1).compile(checkpointer=saver)
        control = graphs.react_graph(rounds=1).compile(checkpointer=forgetting)
        if sync:
            graph.invoke(graphs.react_input(), config("read"))
        else:
            await graph.ainvoke(graphs.react_input(), config("read"))
        control.invoke(graphs.react_input(), config("control"))
        read = saver.keys.thread("read")
        keys = [k for k in read.all() if redis_client.exists(k)]
        assert read.cp in keys
        unread = [k for k in forgetting.keys.thread("control").all() if redis_client.exists(k)]

        start = time.monotonic()
        reads = 0
        while time.monotonic() - start < 2 * TTL_SECONDS:
            await asyncio.sleep(0.75)  # let the ttl run down
            before = redis_client.pttl(read.cp)
            assert before > 0, "the thread expired while it was being read"
            current = (
                graph.get_state(config("read")) if sync else await graph.aget_state(config("read"))
            )
            assert current.values["messages"][-1].content == "final answer"
            after = [redis_client.pttl(k) for k in keys]
            assert after[keys.index(read.cp)] > before, "the read did not refresh the ttl"
            assert all(0 < p <= TTL_SECONDS * 1000 for p in after), after
            reads += 1
        assert reads >= 2
        assert redis_client.exists(*unread) == 0  # without refresh_on_read: gone


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_a_thread_waiting_on_a_human_keeps_its_keys_until_answered(
    redis_url: str, key_prefix: str, redis_client: redis.Redis, mode: str
) -> None:
    """With a ttl of a few seconds, an interrupted thread loses nothing while the human
    takes longer than the ttl to answer, read or not; once answered, its keys expire again.
    The sleep is the ttl running down, the behaviour under test: the keys have no expiry
    at all while the thread waits, so nothing races."""
    async with AsyncExitStack() as stack:
        if mode == "sync":
            saver: Any = stack.enter_context(
                RedisSaver(redis_url=redis_url, key_prefix=key_prefix, ttl=TTL_SECONDS)
            )
        else:
            saver = await stack.enter_async_context(
                AsyncRedisSaver(redis_url, key_prefix=key_prefix, ttl=TTL_SECONDS)
            )
        graph = graphs.approval_graph().compile(checkpointer=saver)

        async def invoke(value: Any) -> Any:
            if mode == "sync":
                return graph.invoke(value, config("waiting"))
            return await graph.ainvoke(value, config("waiting"))

        assert "__interrupt__" in await invoke({"request": "refund"})
        waiting = saver.keys.thread("waiting")
        keys = [k for k in waiting.all() if redis_client.exists(k)]
        assert waiting.cp in keys and waiting.wr in keys  # the checkpoint and the interrupt
        assert [redis_client.pttl(k) for k in keys] == [-1] * len(keys)  # no expiry
        await asyncio.sleep(TTL_SECONDS + 1)  # the human takes longer than the ttl
        assert redis_client.exists(*keys) == len(keys)
        done = await invoke(Command(resume="approved"))
        assert done["request"] == "refund [approved]"
        assert all(0 < redis_client.pttl(k) <= TTL_SECONDS * 1000 for k in keys)


# -- redis+sentinel:// ---------------------------------------------------------------------
PASSWORD = "p@ss/w:rd"  # every character a URL must escape


@dataclass
class SentinelSetup:
    """A private master and a sentinel monitoring it as ``mymaster``."""

    master: Server
    watcher: Server

    def url(self, path: str = "/mymaster") -> str:
        auth = f":{quote(self.master.password, safe='')}@" if self.master.password else ""
        return f"redis+sentinel://{auth}127.0.0.1:{self.watcher.port}{path}"

    @contextmanager
    def on_master(self) -> Iterator[tuple[redis.Redis, str]]:
        """A client straight to the master and a key prefix, deleted afterwards."""
        direct = self.master.client()
        prefix = f"lgdsentinel-{uuid.uuid4().hex[:8]}"
        try:
            yield direct, prefix
        finally:
            delete_prefix(direct, prefix)
            direct.close()


def sentinel_setup(password: str | None) -> Iterator[SentinelSetup]:
    workdir = tempfile.mkdtemp(prefix="lgd-sentinel-")
    master = start_server(workdir, password=password)
    watcher = start_sentinel(workdir, master)
    yield SentinelSetup(master, watcher)
    watcher.stop()
    master.stop()
    shutil.rmtree(workdir, ignore_errors=True)


@pytest.fixture(scope="module")
def sentinel() -> Iterator[SentinelSetup]:
    yield from sentinel_setup(None)


@pytest.fixture(scope="module")
def guarded_sentinel() -> Iterator[SentinelSetup]:
    """The master and its sentinel both with ``requirepass PASSWORD``."""
    yield from sentinel_setup(PASSWORD)


def test_a_sentinel_url_runs_a_graph_on_the_master(sentinel: SentinelSetup) -> None:
    name = f"lgd-compat-{uuid.uuid4().hex[:8]}"
    with sentinel.on_master() as (direct, prefix):
        url = sentinel.url("/mymaster/0")
        with RedisSaver.from_conn_string(url, key_prefix=prefix, client_name=name) as saver:
            graph = graphs.counter_graph().compile(checkpointer=saver)
            assert graph.invoke({"value": 1, "trail": []}, config("t"))["value"] == 17
            assert name in connection_names(direct)  # on the master the sentinel named
        assert direct.exists(saver.keys.thread("t").cp)
        wait_until_gone(direct, name)


async def test_an_async_sentinel_url_runs_a_graph_on_the_master(
    sentinel: SentinelSetup,
) -> None:
    with sentinel.on_master() as (direct, prefix):
        async with AsyncRedisSaver(redis_url=sentinel.url(), key_prefix=prefix) as saver:
            graph = graphs.counter_graph().compile(checkpointer=saver)
            assert (await graph.ainvoke({"value": 1, "trail": []}, config("t")))["value"] == 17
        assert direct.exists(saver.keys.thread("t").cp)


def test_a_sentinel_url_carries_the_password_to_the_sentinels_and_the_master(
    guarded_sentinel: SentinelSetup,
) -> None:
    with guarded_sentinel.on_master() as (direct, prefix):
        url = guarded_sentinel.url("/mymaster/0")
        with RedisSaver(url, key_prefix=prefix) as saver:
            graph = graphs.counter_graph().compile(checkpointer=saver)
            assert graph.invoke({"value": 1, "trail": []}, config("t"))["value"] == 17
        assert direct.exists(saver.keys.thread("t").cp)
        wrong = url.replace(quote(PASSWORD, safe=""), "wrong")
        # No retries: the saver's client would retry MasterNotFoundError (a failover).
        once = {"retry": Retry(NoBackoff(), 0)}
        with (
            pytest.raises(MasterNotFoundError, match="AuthenticationError"),
            RedisSaver(wrong, key_prefix=prefix, connection_args=once),
        ):
            pass


def test_the_command_line_takes_a_sentinel_url(sentinel: SentinelSetup) -> None:
    from click.testing import CliRunner

    from langgraph_durable.cli import cli

    with sentinel.on_master() as (_, prefix):
        with RedisSaver(sentinel.url(), key_prefix=prefix) as saver:
            graphs.counter_graph().compile(checkpointer=saver).invoke(
                {"value": 1, "trail": []}, config("cli-thread")
            )
        where = ["--redis-url", sentinel.url(), "--key-prefix", prefix]
        listed = CliRunner().invoke(cli, ["threads", *where], env={"LGD_SIGNING_KEY": None})
        assert listed.exit_code == 0, listed.output
        assert "cli-thread" in listed.output
        bad = CliRunner().invoke(cli, ["threads", "--redis-url", sentinel.url("/nobody")])
        assert bad.exit_code == 2, bad.output  # a service no sentinel knows: one line


def test_a_sentinel_url_names_a_keyword_redis_py_does_not_take(sentinel: SentinelSetup) -> None:
    with pytest.raises(ConfigurationError, match="'sockettimeout'.*'socket_timeout'"):
        RedisSaver(sentinel.url(), connection_args={"sockettimeout": 1})
