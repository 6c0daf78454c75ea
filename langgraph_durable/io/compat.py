"""langgraph-checkpoint-redis's call shapes, translated once for both savers.

Owns the arguments a user of langgraph-checkpoint-redis brings along and what they mean
here: where the client comes from (a client or URL first, ``redis_url=``,
``redis_client=``, ``connection_args=``) and whether the saver owns it; its ``ttl`` dict
(``default_ttl`` in minutes, ``refresh_on_read``); its ``checkpoint_prefix``.
(``prune``'s ``keep_last`` is the plan's own argument: ``threads.py``.) What has no
counterpart here raises ``ConfigurationError`` naming it, never silently changes
behaviour. No I/O: clients are made lazily by ``connect.py`` (redis-py connects at the
first command).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from langgraph_durable.core.errors import ConfigurationError
from langgraph_durable.io import connect, deadlines

_TTL_KEYS = ("default_ttl", "refresh_on_read")


def ttl_settings(
    ttl: int | Mapping[str, Any] | None, refresh_on_read: bool | None
) -> tuple[int | None, bool]:
    """(ttl in seconds or None, refresh_on_read) from the saver's ``ttl`` and
    ``refresh_on_read`` options.

    An int ``ttl`` is seconds (this package's meaning). A mapping is
    langgraph-checkpoint-redis's: ``default_ttl`` in *minutes* (a float is fine, the
    result is rounded to whole seconds) and ``refresh_on_read``. ``refresh_on_read``
    needs a ttl: there is nothing to refresh without one.
    """
    refresh = refresh_on_read
    if isinstance(ttl, Mapping):
        unknown = sorted(str(k) for k in ttl if k not in _TTL_KEYS)
        if unknown:
            raise ConfigurationError(
                f"the ttl dict has the key{'s' if len(unknown) > 1 else ''} "
                f"{', '.join(map(repr, unknown))}; it takes only 'default_ttl' (minutes) "
                "and 'refresh_on_read'"
            )
        in_dict = ttl.get("refresh_on_read")
        if in_dict is not None and refresh is not None and in_dict != refresh:
            raise ConfigurationError(
                f"refresh_on_read={refresh!r} contradicts the ttl dict's "
                f"'refresh_on_read': {in_dict!r}; give it once"
            )
        refresh = in_dict if in_dict is not None else refresh
        ttl = _minutes_to_seconds(ttl.get("default_ttl"))
    elif ttl is not None and (not isinstance(ttl, int) or isinstance(ttl, bool) or ttl <= 0):
        raise ConfigurationError(
            f"ttl must be a positive integer of seconds, a dict like "
            f"{{'default_ttl': minutes, 'refresh_on_read': True}}, or None; got {ttl!r}"
        )
    if refresh is None:
        refresh = False
    if not isinstance(refresh, bool):
        raise ConfigurationError(f"refresh_on_read must be True or False, got {refresh!r}")
    if refresh and ttl is None:
        raise ConfigurationError(
            "refresh_on_read=True needs a ttl: without one nothing expires, so there is "
            "nothing to refresh"
        )
    return ttl, refresh


def _minutes_to_seconds(minutes: Any) -> int | None:
    if minutes is None:
        return None
    if not isinstance(minutes, (int, float)) or isinstance(minutes, bool) or not minutes > 0:
        raise ConfigurationError(
            f"the ttl dict's 'default_ttl' must be a positive number of minutes, got {minutes!r}"
        )
    seconds = round(minutes * 60)
    if seconds < 1:
        raise ConfigurationError(
            f"the ttl dict's 'default_ttl' of {minutes!r} minutes is under one second"
        )
    return seconds


def key_prefix(
    key_prefix: str,
    checkpoint_prefix: str | None,
    checkpoint_write_prefix: str | None,
    *,
    default: str,
) -> str:
    """The key prefix, given this package's ``key_prefix`` or langgraph-checkpoint-redis's
    ``checkpoint_prefix`` (both keep savers apart). Its ``checkpoint_write_prefix`` has no
    counterpart: a thread's writes live beside its checkpoints, under one prefix."""
    if checkpoint_write_prefix is not None:
        raise ConfigurationError(
            "checkpoint_write_prefix has no counterpart in langgraph-durable: a thread's "
            "pending writes are stored beside its checkpoints under one prefix; pass "
            "checkpoint_prefix (or key_prefix) alone"
        )
    if checkpoint_prefix is None:
        return key_prefix
    if key_prefix != default:
        raise ConfigurationError(
            f"key_prefix={key_prefix!r} and checkpoint_prefix={checkpoint_prefix!r} name "
            "the same thing; pass one"
        )
    return checkpoint_prefix


def open_client(
    saver_cls: type,
    client: Any,
    *,
    redis_url: str | None,
    redis_client: Any,
    connection_args: Mapping[str, Any] | None,
    cluster: bool,
    asyncio: bool,
    max_connections: int | None = None,
    replica_timeout: float = 0.0,
) -> tuple[Any, bool]:
    """(the client a saver runs on, whether the saver made it and so closes it).

    Exactly one of: ``client`` (a client, or a URL as langgraph-checkpoint-redis's first
    argument), ``redis_url`` or ``redis_client``. ``connection_args`` are redis-py options
    for a client the saver makes from a URL; a handed-in client keeps its own.
    """
    sources = [
        name
        for name, value in (
            ("a client or URL as first argument", client),
            ("redis_url", redis_url),
            ("redis_client", redis_client),
        )
        if value is not None
    ]
    if len(sources) != 1:
        raise ConfigurationError(
            "pass exactly one of a client or URL as first argument, redis_url= or "
            f"redis_client=; got {' and '.join(sources) if sources else 'none'}"
        )
    if connection_args is not None and not isinstance(connection_args, Mapping):
        raise ConfigurationError(
            f"connection_args must be a dict of redis-py options, got {connection_args!r}"
        )
    url = client if isinstance(client, str) else redis_url
    if url is None:  # a handed-in client: the options for making one do not apply
        given = client if client is not None else redis_client
        unused = [
            name
            for name, value in (
                (f"connection_args ({', '.join(sorted(connection_args or {}))})", connection_args),
                ("max_connections", max_connections),
            )
            if value
        ]
        if unused:
            raise ConfigurationError(
                f"{' and '.join(unused)} only configure a client the saver makes from a "
                "URL; set them on the client you pass"
            )
        connect.check_client(given, asyncio=asyncio)
        deadlines.warn_without_deadline(given)
        if cluster and not connect.is_cluster(given):
            raise ConfigurationError(
                f"cluster=True, but the client is a {type(given).__name__}: pass a "
                "RedisCluster client, or a URL with cluster=True"
            )
        return given, False
    if not isinstance(url, str) or not url:
        raise ConfigurationError(f"the Redis URL must be a non-empty str, got {url!r}")
    options = dict(connection_args or {})
    if asyncio:
        made = connect.async_client(
            saver_cls,
            url,
            cluster=cluster,
            max_connections=max_connections,
            options=options,
            replica_timeout=replica_timeout,
        )
    else:
        made = connect.sync_client(
            saver_cls, url, cluster=cluster, options=options, replica_timeout=replica_timeout
        )
    return made, True


def conn_string_arguments(
    saver_cls: type, kwargs: Mapping[str, Any], connection_args: Mapping[str, Any] | None
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(saver options, connection_args) of ``from_conn_string``'s keywords: the ones that
    are not saver options join ``connection_args`` (given twice is an error)."""
    options, client_options = connect.split_options(saver_cls, kwargs)
    twice = sorted(set(client_options) & set(connection_args or {}))
    if twice:
        raise ConfigurationError(
            f"{', '.join(map(repr, twice))} given both as a keyword and in connection_args"
        )
    return options, {**(connection_args or {}), **client_options}
