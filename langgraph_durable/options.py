"""The saver's options: what ``RedisSaver`` and ``AsyncRedisSaver`` are configured with.

Owns validating every option (a wrong one is a ``ConfigurationError`` naming it), the
serializer default (strict allowlist, no pickle), building the ``SaverCore`` the plans
run on, and channel versions. No I/O and no plan here: the
contract over these options is in ``base.py``.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver, _with_msgpack_allowlist
from langgraph.checkpoint.serde.base import SerializerProtocol

from langgraph_durable.core.compression import Compression
from langgraph_durable.core.compression import resolve as resolve_compression
from langgraph_durable.core.envelope import Envelope
from langgraph_durable.core.errors import ConfigurationError
from langgraph_durable.core.keys import DEFAULT_KEY_PREFIX, KeySchema
from langgraph_durable.core.reports import RecoveryReport
from langgraph_durable.core.saver_core import SaverCore
from langgraph_durable.core.serde import AllowedTypes, default_serde, warn_if_permissive
from langgraph_durable.io import compat
from langgraph_durable.io.failover import DEFAULT_FAILOVER_TIMEOUT, Failover, check_timeout
from langgraph_durable.io.telemetry import Telemetry, create_telemetry


class SaverOptions(BaseCheckpointSaver[str]):
    """Options shared by ``RedisSaver`` and ``AsyncRedisSaver``.

    Args:
        key_prefix: prefix of every key; savers with different prefixes never see each
            other's data. Must not contain ``{`` or ``}``.
        ttl: seconds; every key of a thread expires this long after its last write.
            ``None`` keeps threads until deleted. langgraph-checkpoint-redis's dict is
            taken too: ``{"default_ttl": minutes, "refresh_on_read": bool}`` (note:
            *minutes* there, seconds as an int).
        refresh_on_read: also give a thread's keys their full ``ttl`` again when it is
            read (``get_tuple``, so every run's start and ``get_state``; ``list`` of the
            thread): a thread waiting on a human (``interrupt()``) and looked at now and
            then does not expire. Needs a ``ttl`` and ``repair_on_read=True``.
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
        failover_timeout: seconds a round trip that lost its server (a Sentinel failover,
            a restart, a dropped connection) is sent again before
            ``FailoverTimeoutError`` (default 15; 0: only redis-py's own retries). Safe:
            every write is idempotent. With ``wait_for_replicas``, a write the replicas
            have not acknowledged during a failover is sent again too (``failover.py``).
        repair_on_read: True (the default): a read that skips a damaged record also
            moves it to the thread's quarantine hash, so later reads do not meet it
            again. False: reads skip damage the same way but never write, as for
            inspection (the ``langgraph-durable`` command line opens its saver so);
            ``verify`` still reports the damage.
        accept_format_1: True (the default): records written by langgraph-durable 0.1
            (format 1, whose checksum or signature does not cover the key prefix) are
            read. Set False once ``resign`` has rewritten every record: then someone
            with write access cannot copy old records in from another key prefix.
        compression: ``"auto"`` (the default: zstd, else zlib if ``zstandard`` is
            missing), ``"zstd"``, ``"zlib"``, or None: channel values and pending writes
            of 1 KB and more are stored compressed where that saves an eighth or more.
            Records are checksummed or signed over the compressed bytes and verified
            before they are decompressed. Any saver reads compressed records whatever
            its setting.
        list_elements: True (the default): each element of a list-valued channel
            (``add_messages``, ``operator.add``), each value of a dict-valued one (a
            ``files`` dict merged per step) and of a pending write's list or dict is
            stored once per thread, and a value names its elements by digest, so a
            thread's memory grows with its messages and documents, not with their
            square. False stores whole values, readable by releases before this one (set
            it before such a rollback). Any saver reads every form whatever its setting.
        verify_elements_on_write: False (the default): a put checks that elements it
            names without sending are in Redis, and their lengths: a window of 8 (plus
            as many as the put sends) moved on from put to put (every one once the
            thread's quarantine holds anything), so Redis's cost per put stays flat;
            one missing or changed in length is sent again within ceil(n / 8) puts of
            a list of n. A same-length change (a bit
            flip) is found by the first process that reads the element, which moves it
            aside (the thread's quarantine then holds something), and the next put
            of a worker holding it sends it again. True: the put checks the element's
            bytes too (SHA-1 in the write script), so the next put finds any damage,
            at a Redis CPU cost that grows with the thread (every list element, at every
            put: measured 0.5 ms instead of 0.17 ms for a put naming 100 messages).
        tracer_provider: where the saver's spans go (OpenTelemetry, the ``otel``
            extra); None (the default): the global provider, which records nothing
            until the application configures the SDK. See docs/operations/observability.md.
        meter_provider: where its metrics go; None: the global one.
        trace_thread_ids: ``"plain"`` (the default) records thread ids on spans as they
            are, ``"hashed"`` as ``sha256:`` and 16 hex digits, ``"omit"`` not at all.
        checkpoint_prefix: langgraph-checkpoint-redis's name for ``key_prefix``.
        checkpoint_write_prefix: langgraph-checkpoint-redis's; has no counterpart here
            (writes live beside their checkpoints), so giving it raises
            ``ConfigurationError``.
    """

    core: SaverCore
    telemetry: Telemetry

    def __init__(
        self,
        *,
        key_prefix: str = DEFAULT_KEY_PREFIX,
        ttl: int | Mapping[str, Any] | None = None,
        refresh_on_read: bool | None = None,
        signing_key: bytes | str | Sequence[bytes | str] | None = None,
        keep_last: int | None = None,
        serde: SerializerProtocol | None = None,
        allowed_types: AllowedTypes = (),
        wait_for_replicas: int = 0,
        replica_timeout: float = 1.0,
        failover_timeout: float = DEFAULT_FAILOVER_TIMEOUT,
        repair_on_read: bool = True,
        accept_format_1: bool = True,
        compression: str | None = "auto",
        list_elements: bool = True,
        verify_elements_on_write: bool = False,
        tracer_provider: Any = None,
        meter_provider: Any = None,
        trace_thread_ids: str = "plain",
        checkpoint_prefix: str | None = None,
        checkpoint_write_prefix: str | None = None,
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
        if not isinstance(list_elements, bool):
            raise ConfigurationError(f"list_elements must be True or False, got {list_elements!r}")
        if not isinstance(verify_elements_on_write, bool):
            raise ConfigurationError(
                f"verify_elements_on_write must be True or False, got {verify_elements_on_write!r}"
            )
        if not isinstance(repair_on_read, bool):
            raise ConfigurationError(
                f"repair_on_read must be True or False, got {repair_on_read!r}"
            )
        if keep_last is not None and (
            not isinstance(keep_last, int) or isinstance(keep_last, bool) or keep_last <= 0
        ):
            raise ConfigurationError(f"keep_last must be a positive integer, got {keep_last!r}")
        ttl, refresh_on_read = compat.ttl_settings(ttl, refresh_on_read)
        if refresh_on_read and not repair_on_read:
            raise ConfigurationError(
                "refresh_on_read=True writes on every read, repair_on_read=False asks reads "
                "never to write; choose one"
            )
        key_prefix = compat.key_prefix(
            key_prefix, checkpoint_prefix, checkpoint_write_prefix, default=DEFAULT_KEY_PREFIX
        )
        self.key_prefix = key_prefix
        self.telemetry = create_telemetry(
            tracer_provider, meter_provider, trace_thread_ids=trace_thread_ids
        )
        self.failover = Failover(check_timeout(failover_timeout))
        self.ttl: int | None = ttl
        self.refresh_on_read = refresh_on_read
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
            compression=Compression(resolve_compression(compression)),
            refresh_on_read=refresh_on_read,
            list_elements=list_elements,
            verify_elements_on_write=verify_elements_on_write,
        )

    @property
    def keys(self) -> KeySchema:
        return self.core.keys

    def recovery_report(self, thread_id: str, checkpoint_ns: str = "") -> RecoveryReport | None:
        """The last fallback a read of this thread had to make, or None if it never had to."""
        return self.core.recovery_reports.get((str(thread_id), checkpoint_ns))

    def with_allowlist(self, extra_allowlist: Collection[tuple[str, ...]]) -> SaverOptions:
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
