"""Calls through redis-py's own machinery, for what ``wire.py`` does not carry.

Owns the calls the driver makes through redis-py: a batch through its pipeline (a
cluster, or a client ``wire.py`` does not drive), the WAIT behind it, a cluster batch
and its WAIT on one connection of the slot's node, and a SCAN over every node. Each is a
zero-argument call the driver's loops make (``driver.py``); a call marked ``once`` is
never sent again on a lost connection: the plan step decides.

WAIT counts the replicas that acknowledged the writes of *its own connection*: on
another connection it counts the writes of that one (often none: it answers at once).
A cluster client sends a pipeline and a command on whatever connections its node's pool
hands out (the asyncio one in turn), so with ``wait_for_replicas`` a cluster batch goes
with its WAIT on one connection of the node that serves its slot (``node_round_trip``),
as ``wire.py`` sends them on one server. A resharding moves the slot (MOVED): the
topology is learned again and the batch goes to the new node; a slot being migrated
(ASK) is a passing state, ridden out like TRYAGAIN.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import partial
from typing import Any

from redis.exceptions import AskError, ConnectionError, MovedError, TimeoutError, TryAgainError

from langgraph_durable.core.ops import Batch, Script
from langgraph_durable.io import wire

logger = logging.getLogger("langgraph_durable")
_REDIRECTS = (MovedError, AskError)
_MOVES_FOLLOWED = 3  # MOVED replies followed at once, before the slot counts as moving

Call = Callable[[], Any]  # sync: returns the reply; asyncio: an awaitable of it


class once:
    """A call the driver must not send again on a lost connection (``failover.py``): the
    plan step that yielded it decides what goes again."""

    failover_retry = False

    def __init__(self, call: Call) -> None:
        self.call = call

    def __call__(self) -> Any:
        return self.call()


def pipelined(client: Any, commands: list[tuple[Any, ...]], atomic: bool) -> Call:
    """The call that sends ``commands`` through redis-py's pipeline; a new pipeline each
    time it is called (a pipeline empties itself when it runs, and a failover sends the
    call again)."""

    def send() -> Any:
        pipe = client.pipeline(transaction=atomic)
        for command in commands:
            pipe.execute_command(*command)
        return pipe.execute(raise_on_error=False)

    return send


def wait_call(client: Any, cluster: bool, wait: tuple[Any, ...], commands: list[Any]) -> Call:
    """WAIT behind a pipelined batch: on a cluster, on the node of its first key.
    Never sent again on its own (``once``): the batch is."""
    if cluster:
        node = client.get_node_from_key(_first_key(commands))
        return once(partial(client.execute_command, *wait, target_nodes=node))
    return once(partial(client.execute_command, *wait))


def node_round_trip(
    client: Any,
    batch: Batch,
    commands: list[Any],
    wait: tuple[Any, ...],
    lost: Callable[[Exception], None],
) -> Call:
    """``batch`` (sent as ``commands``) and its WAIT in one round trip on one connection
    of the node that serves the batch's slot (the module's rules); the WAIT's reply is
    the last result."""
    key, atomic = _first_key(batch.commands), batch.atomic
    if _is_async(client):

        async def asend() -> list[Any]:
            for _ in range(_MOVES_FOLLOWED):
                node = client.get_node_from_key(key)
                conn = node.acquire_connection()
                try:
                    results = await wire.aexchange(
                        conn, commands, atomic, node.response_callbacks, [wait]
                    )
                except _REDIRECTS as exc:  # a transaction's command refused when queued
                    results = [exc]
                except BaseException as exc:
                    await conn.disconnect()
                    if isinstance(exc, (ConnectionError, TimeoutError)):
                        lost(exc)
                        await _arefresh(client)  # the node may be gone: a replica promoted
                    raise
                finally:
                    node.release(conn)
                if not _moved(results):
                    return results
                await _arefresh(client)
            raise TryAgainError("the batch's slot kept moving (a resharding): trying again")

        return asend

    def send() -> list[Any]:
        for _ in range(_MOVES_FOLLOWED):
            node = client.get_node_from_key(key)
            try:
                results = wire.round_trip(
                    client.get_redis_connection(node), commands, atomic, [wait], lost=lost
                )
            except _REDIRECTS as exc:
                results = [exc]
            except (ConnectionError, TimeoutError):
                _refresh(client)
                raise
            if not _moved(results):
                return results  # type: ignore[no-any-return]
            _refresh(client)
        raise TryAgainError("the batch's slot kept moving (a resharding): trying again")

    return send


def _moved(results: list[Any]) -> bool:
    """Whether a reply redirects the batch; an ASK (the slot being migrated) becomes a
    TRYAGAIN in its place, so the driver rides it out."""
    if any(isinstance(reply, MovedError) for reply in results):  # (a subclass of AskError)
        return True
    for i, reply in enumerate(results):
        if isinstance(reply, AskError):
            results[i] = TryAgainError(f"the slot is being migrated: {reply}")
    return False


def _refresh(client: Any) -> None:
    """Learn the cluster's slots again (after a MOVED, or a node lost)."""
    try:
        client.nodes_manager.initialize()
    except Exception as exc:  # noqa: BLE001 - the next attempt finds out (failover budget)
        logger.debug("langgraph-durable: the cluster's slots not learned again: %s", exc)


async def _arefresh(client: Any) -> None:
    try:
        await client.nodes_manager.initialize()
    except Exception as exc:  # noqa: BLE001 - as above
        logger.debug("langgraph-durable: the cluster's slots not learned again: %s", exc)


def _is_async(client: Any) -> bool:
    import redis.asyncio

    return isinstance(client, redis.asyncio.RedisCluster)


def scan_keys(client: Any, pattern: str) -> Any:
    """Every key matching ``pattern`` on every node: a list from a sync client, a
    coroutine of one from an asyncio client (its ``scan_iter`` is an async one)."""
    found = client.scan_iter(match=pattern, count=1000)
    if hasattr(found, "__aiter__"):

        async def collect() -> list[Any]:
            return [key async for key in found]

        return collect()
    return list(found)


def _first_key(commands: list[Any]) -> str:
    first = commands[0]
    return first.keys[0] if isinstance(first, Script) else first[1]  # type: ignore[no-any-return]
