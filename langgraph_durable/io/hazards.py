"""Redis settings that would silently break the saver's guarantees, checked at setup.

Today one: a ``maxmemory-policy`` that lets Redis evict the saver's keys (a thread's index
without its records, a tool ledger without its index). ``eviction_hazard`` decides from
the policy alone; ``eviction_checks`` fetches it from every primary (at ``setup``) and
logs a warning once per process for each server and policy (a CONFIG GET once per client).
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Callable, Generator, Mapping
from functools import partial
from typing import Any

import redis

logger = logging.getLogger("langgraph_durable")

FIX = "set maxmemory-policy noeviction"

_lock = threading.Lock()
_checked: weakref.WeakKeyDictionary[Any, set[bool]] = weakref.WeakKeyDictionary()
_reported: set[tuple[str, str, bool]] = set()  # (server, policy or "?", ttl set)


def eviction_hazard(policy: str, ttl: int | None) -> str | None:
    """Why ``policy`` can evict the saver's keys, or None when it cannot."""
    if policy.startswith("allkeys-"):
        return "Redis may evict any key under memory pressure, the saver's included"
    if policy.startswith("volatile-") and ttl:
        return (
            "Redis may evict keys that have a TTL under memory pressure, and every key of "
            f"this saver has one (ttl={ttl})"
        )
    return None


def policy_of(reply: Any) -> str | None:
    """The policy in a CONFIG GET maxmemory-policy reply (a dict, RESP2 or RESP3), if any."""
    if not isinstance(reply, Mapping):
        return None
    for name, value in reply.items():
        if _text(name) == "maxmemory-policy" and value is not None:
            return _text(value)
    return None


def _text(value: Any) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def _first_check(client: Any, ttl: int | None) -> bool:
    """True once per client (and ttl or not): setup() also runs when scripts are reloaded."""
    with _lock:
        flags = _checked.setdefault(client, set())
        if bool(ttl) in flags:
            return False
        flags.add(bool(ttl))
        return True


def _once(server: str, policy: str, ttl: int | None) -> bool:
    with _lock:
        key = (server, policy, bool(ttl))
        if key in _reported:
            return False
        _reported.add(key)
        return True


def _nodes(client: Any) -> list[tuple[str, dict[str, Any]]]:
    """(server name, config_get options) of every primary ``client`` writes to."""
    if hasattr(client, "get_primaries"):  # a cluster: every primary holds some threads
        return [(node.name, {"target_nodes": node}) for node in client.get_primaries()]
    kwargs = client.connection_pool.connection_kwargs
    name = kwargs.get("path") or f"{kwargs.get('host', 'localhost')}:{kwargs.get('port', 6379)}"
    return [(str(name), {})]


def report(server: str, reply: Any, ttl: int | None) -> None:
    """Log what a CONFIG GET reply (or the error it raised) says about eviction."""
    if isinstance(reply, Exception):
        if _once(server, "?", ttl):
            logger.debug(
                "langgraph-durable: could not check the maxmemory-policy of Redis at %s "
                "(%s); make sure it is noeviction",
                server,
                reply,
            )
        return
    policy = policy_of(reply)
    if policy is None:
        report(server, ValueError("CONFIG GET returned no maxmemory-policy"), ttl)
        return
    hazard = eviction_hazard(policy, ttl)
    if hazard and _once(server, policy, ttl):
        logger.warning(
            "langgraph-durable: Redis at %s has maxmemory-policy %r: %s, and a thread that "
            "loses some of its keys can resume from the wrong place or run a recorded tool "
            "call again: %s (CONFIG SET, and in redis.conf or your provider's settings)",
            server,
            policy,
            hazard,
            FIX,
        )


def eviction_checks(client: Any, ttl: int | None) -> Generator[Callable[[], Any], Any, None]:
    """Warn (once) if any primary of ``client`` may evict the saver's keys: the CONFIG GET
    calls, yielded for the driver to make (``driver.py``) and sent back."""
    if not _first_check(client, ttl):
        return
    for server, options in _nodes(client):
        try:
            reply = yield partial(client.config_get, "maxmemory-policy", **options)
        except redis.ResponseError as exc:  # CONFIG denied by ACL, renamed, or disabled
            reply = exc
        report(server, reply, ttl)
