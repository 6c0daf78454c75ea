"""The connections a saver keeps between round trips (wire.py): one the server closed
meanwhile is replaced without an error even on a client that never retries, a blocking
or small pool lends every one back, closing the saver gives them back, and a WAIT that
rides in a write's round trip and is refused is raised as Redis said it. (That WAIT
asks the connection that wrote: test_redis_restarts.py, with a stopped replica; a
Sentinel failover: test_redis_restarts.py too.)"""

from __future__ import annotations

import asyncio
import threading
import uuid
from typing import Any

import pytest
import redis
import redis.asyncio
from langgraph.checkpoint.base import empty_checkpoint
from redis.backoff import NoBackoff
from redis.retry import Retry

from langgraph_durable import AsyncRedisSaver, RedisSaver
from langgraph_durable.io import kept, wire


def one_checkpoint(thread_id: str) -> tuple[Any, Any, Any, Any]:
    cp = empty_checkpoint()
    cp["channel_values"] = {"n": 1}
    cp["channel_versions"] = {"n": "1"}
    config = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
    return config, cp, {"source": "input", "step": -1}, {"n": "1"}


def kill_named(admin: redis.Redis, name: str) -> int:
    """Close, server side, every connection of the clients named ``name``."""
    ids = [c["id"] for c in admin.client_list() if c.get("name") == name]
    for client_id in ids:
        admin.client_kill_filter(_id=client_id)
    return len(ids)


def in_use(pool: Any) -> int:
    """How many connections ``pool`` has lent out (redis-py's own bookkeeping)."""
    if isinstance(pool, redis.BlockingConnectionPool):
        return len([c for c in pool._connections if c not in pool.pool.queue])
    return len(pool._in_use_connections)


def test_a_kept_connection_closed_by_the_server_is_replaced_without_an_error(
    redis_url: str, redis_client: redis.Redis, key_prefix: str
) -> None:
    name = f"lgd-kept-{uuid.uuid4().hex[:8]}"
    client = redis.Redis.from_url(redis_url, client_name=name, retry=Retry(NoBackoff(), 0))
    saver = RedisSaver(client, key_prefix=key_prefix)
    saver.put(*one_checkpoint("a"))
    assert in_use(client.connection_pool) == 1  # kept for the next round trip
    assert kill_named(redis_client, name) >= 1  # idle timeout, a restart, CLIENT KILL
    saver.put(*one_checkpoint("b"))  # no retry configured: the saver's own one try more
    assert saver.get_tuple(one_checkpoint("b")[0]) is not None
    saver.close()
    assert in_use(client.connection_pool) == 0  # closing gave it back
    client.close()


def test_an_asyncio_kept_connection_closed_by_the_server_is_replaced(
    redis_url: str, redis_client: redis.Redis, key_prefix: str
) -> None:
    name = f"lgd-akept-{uuid.uuid4().hex[:8]}"

    async def run() -> None:
        client = redis.asyncio.Redis.from_url(
            redis_url, client_name=name, retry=Retry(NoBackoff(), 0)
        )
        saver = AsyncRedisSaver(client, key_prefix=key_prefix)
        await saver.aput(*one_checkpoint("a"))
        assert in_use(client.connection_pool) == 1
        assert await asyncio.to_thread(kill_named, redis_client, name) >= 1
        await saver.aput(*one_checkpoint("b"))
        assert await saver.aget_tuple(one_checkpoint("b")[0]) is not None
        await saver.aclose()
        assert in_use(client.connection_pool) == 0
        await client.aclose()

    asyncio.run(run())


@pytest.mark.parametrize(
    "pool",
    [
        lambda url: redis.BlockingConnectionPool.from_url(url, max_connections=50),
        lambda url: redis.ConnectionPool.from_url(url, max_connections=10),
    ],
    ids=["blocking pool", "pool of 10"],
)
def test_a_pool_others_could_wait_on_gets_every_connection_back(
    redis_url: str, key_prefix: str, pool: Any
) -> None:
    client = redis.Redis(connection_pool=pool(redis_url))
    saver = RedisSaver(client, key_prefix=key_prefix)
    saver.put(*one_checkpoint("a"))
    assert saver.get_tuple(one_checkpoint("a")[0]) is not None
    assert in_use(client.connection_pool) == 0
    client.close()


def test_no_more_than_a_few_connections_are_kept(
    redis_url: str, redis_client: redis.Redis, key_prefix: str
) -> None:
    """Six round trips at once (each blocked in the server until released): once they
    end, IDLE_MAX connections stay kept and the others went back to the pool."""
    client = redis.Redis.from_url(redis_url)
    pool, queue = client.connection_pool, f"{key_prefix}:q"
    before = redis_client.info("clients")["blocked_clients"]
    threads = [
        threading.Thread(target=wire.round_trip, args=(client, [("BLPOP", queue, 30)], False))
        for _ in range(6)
    ]
    for t in threads:
        t.start()
    while redis_client.info("clients")["blocked_clients"] < before + 6:  # all six in flight
        assert all(t.is_alive() for t in threads)
    assert in_use(pool) == 6
    redis_client.lpush(queue, *range(6))
    for t in threads:
        t.join()
    assert in_use(pool) == kept.IDLE_MAX
    kept.give_back(client)
    assert in_use(pool) == 0
    client.close()


def test_a_refused_wait_is_raised_as_redis_said_it(
    redis_url: str, redis_client: redis.Redis, key_prefix: str
) -> None:
    """WAIT not allowed (an ACL without it, a managed Redis that disables it): the
    write's own error, not a TypeError from reading it as a count."""
    user, password = f"lgd-nowait-{uuid.uuid4().hex[:8]}", uuid.uuid4().hex
    redis_client.acl_setuser(
        user, enabled=True, passwords=[f"+{password}"], keys=["*"], commands=["+@all", "-wait"]
    )
    try:
        client = redis.Redis.from_url(redis_url, username=user, password=password)
        saver = RedisSaver(client, key_prefix=key_prefix, wait_for_replicas=1)
        with pytest.raises(redis.exceptions.NoPermissionError, match="wait"):
            saver.put(*one_checkpoint("a"))
        config = {"configurable": {"thread_id": "a", "checkpoint_ns": "", "checkpoint_id": "x"}}
        with pytest.raises(redis.exceptions.NoPermissionError, match="wait"):
            saver.put_writes(config, [("c", 1)], "task")
        saver.close()
        client.close()
    finally:
        redis_client.acl_deluser(user)


def named_ids(admin: redis.Redis, name: str) -> set[int]:
    return {c["id"] for c in admin.client_list() if c.get("name") == name}


def test_a_kept_connection_the_server_asked_to_move_reconnects(
    redis_url: str, redis_client: redis.Redis, key_prefix: str
) -> None:
    """A maintenance notification marks a connection to reconnect; the pool's release
    would drop it, so a kept one is reconnected before its next round trip (sync and
    asyncio: the asyncio disconnect is awaited)."""
    name = f"lgd-moved-{uuid.uuid4().hex[:8]}"

    def marked(pool: Any) -> Any:
        (conn,) = pool.__dict__["_langgraph_durable_idle"].connections
        if not hasattr(conn, "mark_for_reconnect"):
            pytest.skip("this redis-py has no maintenance notifications")
        conn.mark_for_reconnect()
        return conn

    client = redis.Redis.from_url(redis_url, client_name=name)
    saver = RedisSaver(client, key_prefix=key_prefix)
    saver.put(*one_checkpoint("a"))
    before, conn = named_ids(redis_client, name), marked(client.connection_pool)
    saver.put(*one_checkpoint("b"))
    assert not conn.should_reconnect() and named_ids(redis_client, name) - before
    saver.close()
    client.close()

    async def run() -> None:
        aclient = redis.asyncio.Redis.from_url(redis_url, client_name=f"a{name}")
        asaver = AsyncRedisSaver(aclient, key_prefix=key_prefix)
        await asaver.aput(*one_checkpoint("c"))
        before, conn = named_ids(redis_client, f"a{name}"), marked(aclient.connection_pool)
        await asaver.aput(*one_checkpoint("d"))
        assert not conn.should_reconnect()
        assert named_ids(redis_client, f"a{name}") - before
        await asaver.aclose()
        await aclient.aclose()

    asyncio.run(run())


def test_an_asyncio_saver_made_from_a_url_keeps_a_connection_between_round_trips(
    redis_url: str, key_prefix: str
) -> None:
    """Its pool is a blocking one only it uses: a round trip takes the connection the one
    before kept instead of the pool's checkout (a lock and a probe of the socket each
    time); closing the saver gives it back."""

    async def run() -> None:
        async with AsyncRedisSaver.from_conn_string(redis_url, key_prefix=key_prefix) as saver:
            pool = saver.client.connection_pool
            assert isinstance(pool, redis.asyncio.BlockingConnectionPool)
            await saver.aput(*one_checkpoint("a"))
            assert in_use(pool) == 1  # kept
            connection = kept.idle_of(pool).connections[-1]
            assert await saver.aget_tuple(one_checkpoint("a")[0]) is not None
            assert kept.idle_of(pool).connections == [connection]  # the same, again
        assert in_use(pool) == 0

    asyncio.run(run())


def test_an_asyncio_blocking_pool_the_caller_shares_gets_every_connection_back(
    redis_url: str, key_prefix: str
) -> None:
    async def run() -> None:
        pool = redis.asyncio.BlockingConnectionPool.from_url(redis_url, max_connections=50)
        client = redis.asyncio.Redis(connection_pool=pool)
        saver = AsyncRedisSaver(client, key_prefix=key_prefix)
        await saver.aput(*one_checkpoint("a"))
        assert await saver.aget_tuple(one_checkpoint("a")[0]) is not None
        assert in_use(pool) == 0
        await client.aclose()

    asyncio.run(run())


def test_an_asyncio_round_trip_schedules_no_task_of_its_own(
    redis_url: str, key_prefix: str
) -> None:
    """With a ``socket_timeout`` (the saver's clients always have one), redis-py sends
    through ``asyncio.wait_for``: a new Task per send, and one more turn of the event
    loop before the bytes leave. The saver's sends queue the bytes at once (wire.py
    ``_asend``): a put, its writes and a read make no Task."""

    async def run() -> None:
        async with AsyncRedisSaver.from_conn_string(redis_url, key_prefix=key_prefix) as saver:
            assert saver.client.connection_pool.connection_kwargs["socket_timeout"]
            config, checkpoint, metadata, versions = one_checkpoint("tasks")
            await saver.aput(config, checkpoint, metadata, versions)  # connected, scripts loaded
            loop = asyncio.get_running_loop()
            made: list[Any] = []

            def factory(loop: Any, coro: Any, **kwargs: Any) -> asyncio.Task[Any]:
                made.append(coro)
                return asyncio.Task(coro, loop=loop, **kwargs)

            loop.set_task_factory(factory)
            try:
                stored = await saver.aput(config, checkpoint, metadata, versions)
                await saver.aput_writes(stored, [("a", 1)], "task-1")
                assert await saver.aget_tuple(stored) is not None
            finally:
                loop.set_task_factory(None)
            assert made == []

    asyncio.run(run())


def test_an_asyncio_round_trip_that_fits_the_socket_arms_no_send_deadline(
    redis_url: str, key_prefix: str
) -> None:
    """A send whose bytes the socket takes at once (as a superstep's are) has nothing to
    wait for: no timer is armed for its deadline, only the reply's (redis-py's read
    deadline, one a reply: a put and its writes read one each). A send that must wait
    for the socket to drain keeps its deadline (test_liveness.py: a frozen server that
    stops reading)."""

    async def run() -> None:
        async with AsyncRedisSaver.from_conn_string(redis_url, key_prefix=key_prefix) as saver:
            config, checkpoint, metadata, versions = one_checkpoint("timers")
            await saver.aput(config, checkpoint, metadata, versions)  # connected, scripts loaded
            loop = asyncio.get_running_loop()
            armed: list[float] = []
            call_at = loop.call_at

            def counted(when: float, *args: Any, **kwargs: Any) -> Any:
                armed.append(when)
                return call_at(when, *args, **kwargs)

            loop.call_at = counted  # type: ignore[method-assign]
            try:
                stored = await saver.aput(config, checkpoint, metadata, versions)
                await saver.aput_writes(stored, [("a", 1)], "task-1")
            finally:
                del loop.call_at
            assert len(armed) == 2  # the two replies' read deadlines

    asyncio.run(run())


def test_an_asyncio_connection_class_with_its_own_send_is_sent_through(
    redis_url: str, key_prefix: str
) -> None:
    """The saver's quick send (wire.py ``_asend``) is only for redis-py's own: a
    connection class that replaces ``send_packed_command`` (tracing, a proxy) sees every
    round trip."""
    sent: list[Any] = []

    class Traced(redis.asyncio.Connection):
        async def send_packed_command(self, command: Any, check_health: bool = True) -> None:
            sent.append(command)
            await super().send_packed_command(command, check_health)

    async def run() -> None:
        pool = redis.asyncio.BlockingConnectionPool.from_url(
            redis_url, connection_class=Traced, socket_timeout=5
        )
        client = redis.asyncio.Redis(connection_pool=pool)
        saver = AsyncRedisSaver(client, key_prefix=key_prefix)
        await saver.asetup()
        before = len(sent)
        stored = await saver.aput(*one_checkpoint("traced"))
        await saver.aput_writes(stored, [("a", 1)], "task-1")
        assert len(sent) - before == 2  # the put's round trip, the writes'
        await client.aclose()

    asyncio.run(run())
