"""The redis-py clients a saver runs on: made from a URL, or checked when handed in.

Owns which clients a saver accepts (``check_client``), Redis Sentinel URLs (``redis+sentinel://``: the master the
sentinels name, through redis-py's ``Sentinel.master_for``), the split of
``from_conn_string``'s keywords into saver options (the parameters of the saver's
``__init__``: ``key_prefix``, ``ttl``, ...) and client options (everything else, for
redis-py: ``ssl_ca_certs``, ``socket_timeout``, ``username``, ...), and the check that
redis-py takes every client option. Unchecked, redis-py reports an unknown keyword only
at the first command, as a TypeError from deep inside it, and the Redis Cluster client
drops it silently (a misspelt ``ssl_ca_certs`` would go unnoticed).
"""

from __future__ import annotations

import difflib
import inspect
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlsplit

import redis
import redis.asyncio
import redis.asyncio.cluster
import redis.asyncio.connection
import redis.cluster
import redis.connection

from langgraph_durable.core.errors import ConfigurationError
from langgraph_durable.core.redact import redact_url
from langgraph_durable.io import kept
from langgraph_durable.io.deadlines import client_options, no_retry, with_deadlines

logger = logging.getLogger("langgraph_durable")

# Keywords of the savers' __init__ that say where the client comes from, not saver options.
_NOT_OPTIONS = {
    "self",
    "client",
    "redis_url",
    "redis_client",
    "connection_args",
    "cluster",
    "max_connections",
}
SENTINEL_SCHEME = "redis+sentinel"
SENTINEL_PORT = 26379
# Keywords a sentinel URL's client takes besides its master connections' options.
_SENTINEL_OPTIONS = {"sentinel_kwargs", "min_other_sentinels", "force_master_ip"}


def check_client(client: Any, *, asyncio: bool) -> None:
    """Reject clients the saver cannot work with, saying why."""
    import redis
    import redis.asyncio
    import redis.asyncio.cluster
    import redis.cluster

    expected: tuple[type, ...] = (
        (redis.asyncio.Redis, redis.asyncio.cluster.RedisCluster)
        if asyncio
        else (redis.Redis, redis.cluster.RedisCluster)
    )
    if not isinstance(client, expected):
        names = " or ".join(f"{c.__module__}.{c.__qualname__}" for c in expected)
        raise ConfigurationError(f"expected a {names} client, got {type(client).__name__}")
    if client.get_encoder().decode_responses:
        raise ConfigurationError(
            "the Redis client must be created with decode_responses=False: "
            "checkpoints are binary records"
        )
    if _retries(client) == 0:
        logger.warning(
            "langgraph-durable: this Redis client does not retry on connection errors, so a "
            "dropped connection fails the run; pass retry=Retry(...) when creating it (the "
            "saver's writes are idempotent, so retries are safe)"
        )


DEFAULT_MAX_CONNECTIONS = 100  # AsyncRedisSaver's pool: many graphs share it


def is_cluster(client: Any) -> bool:
    """Whether ``client`` is a Redis Cluster client (sync or asyncio)."""
    return isinstance(client, (redis.cluster.RedisCluster, redis.asyncio.cluster.RedisCluster))


def _retries(client: Any) -> int:
    """How often ``client`` resends a command on a connection error."""
    retry = client.get_retry() if hasattr(client, "get_retry") else getattr(client, "retry", None)
    return retry.get_retries() if retry is not None else 0


def keywords(*classes: type) -> set[str]:
    """Every keyword the ``__init__`` of ``classes`` and of their bases names (redis-py's
    connection classes pass the rest of their keywords up to their bases)."""
    names: set[str] = set()
    for cls in classes:
        for klass in cls.__mro__:
            init = klass.__dict__.get("__init__")
            if klass is object or init is None:
                continue
            names.update(
                p.name
                for p in inspect.signature(init).parameters.values()
                if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
            )
    return names - {"self"}


def split_options(
    saver_cls: type, options: Mapping[str, Any]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(saver options, client options) of ``from_conn_string``'s keywords."""
    saver_names = keywords(saver_cls) - _NOT_OPTIONS
    saver = {k: v for k, v in options.items() if k in saver_names}
    client = {k: v for k, v in options.items() if k not in saver_names}
    return saver, client


def _check(
    client_options: Mapping[str, Any],
    accepted: set[str],
    *,
    client: str,
    saver_names: Iterable[str],
    tls_names: Iterable[str] = (),
) -> None:
    """ConfigurationError naming each client option not ``accepted`` (with the nearest
    valid name; ``tls_names`` are options only a ``rediss://`` URL takes)."""
    unknown = sorted(set(client_options) - accepted)
    if not unknown:
        return
    hints = []
    for name in unknown:
        if name in tls_names:
            hints.append(f"{name!r} (a TLS option: use a rediss:// URL)")
            continue
        close = difflib.get_close_matches(name, [*accepted, *saver_names, *tls_names], n=1)
        hints.append(f"{name!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
    raise ConfigurationError(
        f"the Redis client option{'s' if len(unknown) > 1 else ''} {', '.join(hints)} "
        f"(a keyword of from_conn_string or a key of connection_args) "
        f"{'are' if len(unknown) > 1 else 'is'} neither a saver option "
        f"({', '.join(sorted(saver_names))}) nor an option {client} accepts"
    )


def _scheme(url: str) -> str:
    return url.partition("://")[0].lower()


def _connection_class(url: str, options: Mapping[str, Any], module: Any) -> type:
    """The connection class redis-py's ``from_url`` will use for ``url``."""
    if "connection_class" in options:
        return options["connection_class"]  # type: ignore[no-any-return]
    scheme = _scheme(url)
    if scheme == "rediss":
        return module.SSLConnection  # type: ignore[no-any-return]
    if scheme == "unix":
        return module.UnixDomainSocketConnection  # type: ignore[no-any-return]
    return module.Connection  # type: ignore[no-any-return]


def check_url(url: str) -> None:
    """``ConfigurationError`` naming what redis-py cannot read in ``url`` (scheme, port,
    host, a query option), before any client is made: redis-py raises a bare
    ``ValueError`` for these."""
    if not isinstance(url, str):
        raise ConfigurationError(f"a Redis URL must be a string, got {type(url).__name__}")
    if is_sentinel_url(url):
        parse_sentinel_url(url)
        return
    try:
        redis.connection.parse_url(url)
    except ValueError as exc:
        raise ConfigurationError(f"bad Redis URL {redact_url(url)}: {exc}") from None


def sync_client(
    saver_cls: type,
    url: str,
    *,
    cluster: bool,
    options: Mapping[str, Any],
    replica_timeout: float = 0.0,
) -> redis.Redis | redis.cluster.RedisCluster:
    """A ``redis.Redis`` (or ``RedisCluster``) for ``url`` with the client ``options``
    (and the saver's deadlines where they name none: ``with_deadlines``)."""
    check_url(url)
    saver_names = keywords(saver_cls) - _NOT_OPTIONS | {"cluster"}
    if is_sentinel_url(url):
        master: redis.Redis = _sentinel_client(
            url, options, asyncio=False, saver_names=saver_names, replica_timeout=replica_timeout
        )
        return master
    if cluster:
        # RedisCluster hands its nodes only the keywords it knows and drops the others.
        allowed = set(getattr(redis.cluster, "REDIS_ALLOWED_KEYS", ())) - set(
            getattr(redis.cluster, "KWARGS_DISABLED_KEYS", ())
        )
        accepted = keywords(redis.cluster.RedisCluster) | allowed
        _check(options, accepted, client="redis-py's RedisCluster", saver_names=saver_names)
        return redis.cluster.RedisCluster.from_url(
            url, **client_options(options, asyncio=False, replica_timeout=replica_timeout)
        )
    accepted = {"single_connection_client"} | keywords(
        redis.connection.ConnectionPool, _connection_class(url, options, redis.connection)
    )
    _check(
        options,
        accepted,
        client=f"redis-py's Redis.from_url for {_scheme(url)}:// URLs",
        saver_names=saver_names,
        tls_names=keywords(redis.connection.SSLConnection),
    )
    return redis.Redis.from_url(
        url, **client_options(options, asyncio=False, replica_timeout=replica_timeout)
    )


def async_client(
    saver_cls: type,
    url: str,
    *,
    cluster: bool,
    max_connections: int | None,
    options: Mapping[str, Any],
    replica_timeout: float = 0.0,
) -> redis.asyncio.Redis | redis.asyncio.cluster.RedisCluster:
    """A ``redis.asyncio`` client for ``url``: a blocking pool of ``max_connections``
    (a call waits up to 20 s for a free connection unless ``timeout`` says otherwise),
    a cluster client, or the master a ``redis+sentinel://`` URL's sentinels name."""
    check_url(url)
    saver_names = keywords(saver_cls) - _NOT_OPTIONS | {"cluster", "max_connections"}
    if is_sentinel_url(url):
        # redis-py's sentinel pool does not block when full: capped only if asked to.
        capped = {"max_connections": max_connections} if max_connections else {}
        amaster: redis.asyncio.Redis = _sentinel_client(
            url,
            {**capped, **options},
            asyncio=True,
            saver_names=saver_names,
            replica_timeout=replica_timeout,
        )
        return amaster
    max_connections = max_connections or DEFAULT_MAX_CONNECTIONS
    if cluster:
        accepted = keywords(redis.asyncio.cluster.RedisCluster)
        _check(options, accepted, client="redis-py's asyncio RedisCluster", saver_names=saver_names)
        return redis.asyncio.cluster.RedisCluster.from_url(
            url,
            **client_options(
                {"max_connections": max_connections, **options},
                asyncio=True,
                replica_timeout=replica_timeout,
            ),
        )
    accepted = keywords(
        redis.asyncio.BlockingConnectionPool,
        _connection_class(url, options, redis.asyncio.connection),
    )
    _check(
        options,
        accepted,
        client=f"redis-py's asyncio connection pool for {_scheme(url)}:// URLs",
        saver_names=saver_names,
        tls_names=keywords(redis.asyncio.connection.SSLConnection),
    )
    pool = redis.asyncio.BlockingConnectionPool.from_url(
        url,
        **client_options(
            {"max_connections": max_connections, "timeout": 20, **options},
            asyncio=True,
            replica_timeout=replica_timeout,
        ),
    )
    kept.own(pool)  # the saver's alone: it keeps a connection between round trips
    return redis.asyncio.Redis.from_pool(pool)


@dataclass(frozen=True)
class SentinelUrl:
    """What a ``redis+sentinel://[user:password@]host:port[,host:port...]/service[/db]``
    URL says (as langgraph-checkpoint-redis reads it: the port defaults to 26379, the
    service to ``mymaster``)."""

    hosts: list[tuple[str, int]]
    service: str
    db: int | None
    username: str | None
    password: str | None


def is_sentinel_url(url: str) -> bool:
    """Whether ``url`` is a ``redis+sentinel://`` URL."""
    return _scheme(url) == SENTINEL_SCHEME


def parse_sentinel_url(url: str) -> SentinelUrl:
    """The parts of a sentinel URL; ``ConfigurationError`` naming what is wrong."""
    parsed = urlsplit(url)
    if parsed.scheme.lower() != SENTINEL_SCHEME:
        raise ConfigurationError(f"not a {SENTINEL_SCHEME}:// URL: {redact_url(url)}")
    if parsed.query or parsed.fragment:
        raise ConfigurationError(
            f"a {SENTINEL_SCHEME}:// URL takes no query options (got {parsed.query!r}): pass "
            "them as keywords of from_conn_string or in connection_args"
        )
    hosts = [_address(part, url) for part in parsed.netloc.rpartition("@")[2].split(",")]
    path = [p for p in parsed.path.split("/") if p]
    if len(path) > 2 or (len(path) == 2 and not path[1].isdigit()):
        raise ConfigurationError(
            f"the path of {redact_url(url)} must be /service_name or /service_name/db"
        )
    return SentinelUrl(
        hosts=hosts,
        service=unquote(path[0]) if path else "mymaster",
        db=int(path[1]) if len(path) == 2 else None,
        username=unquote(parsed.username) if parsed.username else None,
        password=unquote(parsed.password) if parsed.password else None,
    )


def _address(part: str, url: str) -> tuple[str, int]:
    """``host[:port]`` or ``[ipv6][:port]`` of a sentinel (port 26379 if none)."""
    if part.startswith("["):
        host, _, rest = part[1:].partition("]")
        after_host, port = rest[:1], rest[1:]
    else:
        host, after_host, port = part.partition(":")
    if not host or after_host not in ("", ":") or (port and not port.isdigit()):
        raise ConfigurationError(f"bad sentinel address {part!r} in {redact_url(url)}")
    return host, int(port) if port else SENTINEL_PORT


def _sentinel_client(
    url: str,
    options: Mapping[str, Any],
    *,
    asyncio: bool,
    saver_names: Iterable[str],
    replica_timeout: float = 0.0,
) -> Any:
    """A client of the master the sentinels of ``url`` name, re-discovered on reconnect
    (after a failover). The URL's credentials are the master's and, unless
    ``sentinel_kwargs`` says otherwise, the sentinels' (as langgraph-checkpoint-redis)."""
    if asyncio:
        import redis.asyncio.sentinel as sentinel_module
    else:
        import redis.sentinel as sentinel_module  # type: ignore[no-redef]
    where = parse_sentinel_url(url)
    options = dict(options)
    credentials = {
        k: v for k, v in (("username", where.username), ("password", where.password)) if v
    }
    connection_class = (
        sentinel_module.SentinelManagedSSLConnection
        if options.get("ssl")
        else sentinel_module.SentinelManagedConnection
    )
    accepted = (
        _SENTINEL_OPTIONS
        | {"ssl"}
        | keywords(sentinel_module.SentinelConnectionPool, connection_class)
    )
    _check(
        options,
        accepted,
        client=f"redis-py's {'asyncio ' if asyncio else ''}Sentinel client",
        saver_names=saver_names,
    )
    manager_options = {k: options.pop(k) for k in _SENTINEL_OPTIONS if k in options}
    # As redis-py does without sentinel_kwargs, the sentinels get the socket options too;
    # but no retries: the other sentinels are the redundancy, so one that does not answer
    # is passed over at once (redis-py's default waits seconds on each).
    deadlines = with_deadlines(options, replica_timeout)
    sockets = {k: v for k, v in deadlines.items() if k.startswith("socket_")}
    manager_options.setdefault(
        "sentinel_kwargs", {**sockets, **credentials, "retry": no_retry(asyncio=asyncio)}
    )
    master_options = {**credentials, **options}
    if where.db is not None:
        master_options.setdefault("db", where.db)
    sentinel = sentinel_module.Sentinel(where.hosts, **manager_options)
    master = client_options(master_options, asyncio=asyncio, replica_timeout=replica_timeout)
    return sentinel.master_for(where.service, **master)


def sentinel_clients(client: Any) -> list[Any]:
    """The clients of the sentinels behind a sentinel URL's ``client`` (closed with it),
    else []."""
    manager = getattr(getattr(client, "connection_pool", None), "sentinel_manager", None)
    return list(getattr(manager, "sentinels", []))
