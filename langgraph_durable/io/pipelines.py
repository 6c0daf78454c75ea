"""Calls through redis-py's own machinery, for what ``wire.py`` does not carry.

Owns the calls the driver makes through redis-py: a batch through its pipeline (a
cluster, or a client ``wire.py`` does not drive), the WAIT behind it, and a SCAN over
every node. Each is a zero-argument call the driver's loops make (``driver.py``); a call
marked ``once`` is never sent again on a lost connection: the plan step decides.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from langgraph_durable.core.ops import Script

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
