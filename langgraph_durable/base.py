"""What the sync and async savers share: options, validation, versions. No I/O here."""

from __future__ import annotations

import copy
import logging
import random
from collections.abc import Collection, Sequence
from contextlib import AbstractAsyncContextManager, AbstractContextManager
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver, _with_msgpack_allowlist
from langgraph.checkpoint.serde.base import SerializerProtocol
from redis.exceptions import NoScriptError

from langgraph_durable import hazards
from langgraph_durable import lease as leases
from langgraph_durable.core import Batch, RecoveryReport, SaverCore, Script
from langgraph_durable.envelope import Envelope
from langgraph_durable.errors import ConfigurationError
from langgraph_durable.keys import KeySchema
from langgraph_durable.scripts import ScriptSet
from langgraph_durable.serde import AllowedTypes, default_serde, warn_if_permissive

DEFAULT_KEY_PREFIX = "lgd"
logger = logging.getLogger("langgraph_durable")


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


def client_retry(*, asyncio: bool) -> Any:
    """What the savers' own clients do on a dropped connection or a timeout: reconnect
    and resend, up to 10 times with jittered backoff (10 ms doubling to 1 s). Safe
    because every write the saver makes is idempotent: resending a command that did run
    (its reply was lost) stores the same bytes under the same fields again.
    (redis-py's ``from_url`` clients do not retry unless given a ``Retry``.)"""
    from redis.backoff import ExponentialWithJitterBackoff

    if asyncio:
        from redis.asyncio.retry import Retry as AsyncRetry

        return AsyncRetry(ExponentialWithJitterBackoff(base=0.01, cap=1.0), retries=10)
    from redis.retry import Retry

    return Retry(ExponentialWithJitterBackoff(base=0.01, cap=1.0), retries=10)


def batch_commands(op: Batch, scripts: ScriptSet) -> list[tuple[Any, ...]]:
    """A batch's commands as sent: its scripts as EVALSHA(_RO) of the loaded script."""
    return [
        scripts.command(c.name, c.keys, c.args) if isinstance(c, Script) else c for c in op.commands
    ]


def script_reply(core: SaverCore, op: Script, reply: Any, *, first_try: bool) -> Any:
    """What a script call returns: its reply, or its error typed (``script_error``), or
    ``NOSCRIPT`` on a first try (then the shell loads the scripts and resends)."""
    if isinstance(reply, NoScriptError) and first_try:
        return NOSCRIPT
    if isinstance(reply, Exception):
        raise core.script_error(op, reply)
    return reply


NOSCRIPT = object()  # a script call Redis did not know: load the scripts, send it again


def batch_replies(
    core: SaverCore, op: Batch, replies: list[Any], *, first_try: bool
) -> list[Any] | None:
    """What a batch's shell returns: its replies (its first error raised, typed, unless
    ``errors_as_values``), or None on a first try Redis answered NOSCRIPT (restarted,
    or SCRIPT FLUSH): then the shell loads the scripts and resends it, which is safe
    because every batch is idempotent."""
    if first_try and any(isinstance(reply, NoScriptError) for reply in replies):
        return None
    error = None if op.errors_as_values else core.batch_error(op, replies)
    if error is not None:
        raise error
    return replies


def _retries(client: Any) -> int:
    """How often ``client`` resends a command on a connection error."""
    retry = client.get_retry() if hasattr(client, "get_retry") else getattr(client, "retry", None)
    return retry.get_retries() if retry is not None else 0


class BaseRedisSaver(BaseCheckpointSaver[str]):
    """Options shared by ``RedisSaver`` and ``AsyncRedisSaver``.

    Args:
        key_prefix: prefix of every key; savers with different prefixes never see each
            other's data. Must not contain ``{`` or ``}``.
        ttl: seconds; every key of a thread expires this long after its last write.
            ``None`` keeps threads until deleted.
        signing_key: a key (or a list, newest first) for HMAC-SHA256 signatures; the
            first signs, all verify. Without it, records carry an xxh3-128 checksum.
        keep_last: keep the N newest checkpoints of each thread and namespace (plus the
            ancestors their DeltaChannels are rebuilt from); older ones are pruned as the
            thread grows. ``None`` keeps everything.
        serde: LangGraph serializer. The default is ``JsonPlusSerializer`` with LangGraph's
            strict msgpack allowlist and no pickle: stored bytes never name a callable
            that runs. A record naming a type outside the allowlist reads as damage.
        allowed_types: more types (classes or ``(module, name)`` pairs) the serializer
            may construct, beyond LangGraph's safe types and what the compiled graph
            declares (its state schema's types, through ``with_allowlist``).
        wait_for_replicas: after every checkpoint, pending-write and ledger write, wait
            (Redis ``WAIT``) until this many replicas have it; fewer within
            ``replica_timeout`` seconds raises ``NotReplicatedError`` (the write stays on
            the primary). 0, the default, does not wait.
        replica_timeout: seconds to wait for the replicas.
        repair_on_read: True (the default): a read that skips a damaged record also
            moves it to the thread's quarantine hash, so later reads do not meet it
            again. False: reads skip damage the same way but never write, as for
            inspection (the ``langgraph-durable`` command line opens its saver so);
            ``verify`` still reports the damage.
        accept_format_1: True (the default): records written by langgraph-durable 0.1
            (format 1, whose checksum or signature does not cover the key prefix) are
            read. Set False once ``resign`` has rewritten every record: then someone
            with write access cannot copy old records in from another key prefix.
    """

    core: SaverCore

    def __init__(
        self,
        *,
        key_prefix: str = DEFAULT_KEY_PREFIX,
        ttl: int | None = None,
        signing_key: bytes | str | Sequence[bytes | str] | None = None,
        keep_last: int | None = None,
        serde: SerializerProtocol | None = None,
        allowed_types: AllowedTypes = (),
        wait_for_replicas: int = 0,
        replica_timeout: float = 1.0,
        repair_on_read: bool = True,
        accept_format_1: bool = True,
    ) -> None:
        if serde is None:
            serde = default_serde(allowed_types)
        else:
            warn_if_permissive(serde, signed=signing_key is not None)
            if allowed_types:
                serde = _with_msgpack_allowlist(serde, list(allowed_types))
        super().__init__(serde=serde)
        if (
            not isinstance(wait_for_replicas, int)
            or isinstance(wait_for_replicas, bool)
            or wait_for_replicas < 0
        ):
            raise ConfigurationError(
                f"wait_for_replicas must be an integer >= 0, got {wait_for_replicas!r}"
            )
        if not isinstance(replica_timeout, (int, float)) or not replica_timeout > 0:
            raise ConfigurationError(
                f"replica_timeout must be a number of seconds > 0, got {replica_timeout!r}"
            )
        if not isinstance(repair_on_read, bool):
            raise ConfigurationError(
                f"repair_on_read must be True or False, got {repair_on_read!r}"
            )
        for name, value in (("ttl", ttl), ("keep_last", keep_last)):
            if value is not None and (
                not isinstance(value, int) or isinstance(value, bool) or value <= 0
            ):
                raise ConfigurationError(f"{name} must be a positive integer, got {value!r}")
        self.key_prefix = key_prefix
        self.ttl = ttl
        self.keep_last = keep_last
        self.core = SaverCore(
            serde=self.serde,
            keys=KeySchema(key_prefix),
            envelope=Envelope(signing_key, key_prefix, accept_format_1=accept_format_1),
            ttl=ttl,
            keep_last=keep_last,
            wait_for_replicas=wait_for_replicas,
            replica_timeout_ms=max(1, round(replica_timeout * 1000)),
            repair_on_read=repair_on_read,
        )

    @property
    def keys(self) -> KeySchema:
        return self.core.keys

    # setup() warns once if Redis may evict the saver's keys (see hazards.py)
    def _check_eviction(self) -> None:
        hazards.check_eviction(self.client, self.ttl)  # type: ignore[attr-defined]

    async def _acheck_eviction(self) -> None:
        await hazards.acheck_eviction(self.client, self.ttl)  # type: ignore[attr-defined]

    def lease(
        self,
        thread: str | RunnableConfig,
        *,
        ttl: float = leases.DEFAULT_LEASE_TTL,
        wait: float = 0.0,
    ) -> AbstractContextManager[leases.Lease]:
        """Hold the thread's lease for the block: one writer per thread.

        Renewed every ``ttl / 3`` s by a background thread; the block's writes carry its
        fencing token. Raises ``LeaseHeldError`` if another worker holds it for longer
        than ``wait`` seconds. See ``langgraph_durable.lease``.
        """
        return leases.hold(self, thread, ttl, wait)

    def alease(
        self,
        thread: str | RunnableConfig,
        *,
        ttl: float = leases.DEFAULT_LEASE_TTL,
        wait: float = 0.0,
    ) -> AbstractAsyncContextManager[leases.Lease]:
        """``lease`` for ``async with``; renewed by an asyncio task."""
        return leases.ahold(self, thread, ttl, wait)

    def recovery_report(self, thread_id: str, checkpoint_ns: str = "") -> RecoveryReport | None:
        """The last fallback a read of this thread had to make, or None if it never had to."""
        return self.core.recovery_reports.get((str(thread_id), checkpoint_ns))

    def with_allowlist(self, extra_allowlist: Collection[tuple[str, ...]]) -> BaseRedisSaver:
        clone = super().with_allowlist(extra_allowlist)
        if clone is not self:  # the clone has a new serde: give it a core that uses it
            clone.core = copy.copy(self.core)
            clone.core.serde = clone.serde
        return clone  # type: ignore[return-value]

    def get_next_version(self, current: str | None, channel: None) -> str:
        # As InMemorySaver: a zero-padded counter (sorts as text) and a random tail, so
        # two forks from one checkpoint never write different values under one version.
        if current is None:
            current_v = 0
        elif isinstance(current, int):
            current_v = current
        else:
            current_v = int(current.split(".")[0])
        return f"{current_v + 1:032}.{random.random():016}"
