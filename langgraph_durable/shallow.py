"""``ShallowRedisSaver`` / ``AsyncShallowRedisSaver``: langgraph-checkpoint-redis's names
for a saver that keeps only the newest checkpoint of each thread and namespace.

Owns nothing but the names: each is its saver with ``keep_last=1`` (retention keeps
what a read may still need besides: the newest checkpoint that verifies, and the
ancestors its DeltaChannels are rebuilt from).
"""

from __future__ import annotations

from typing import Any

from langgraph_durable.aio import AsyncRedisSaver
from langgraph_durable.errors import ConfigurationError
from langgraph_durable.saver import RedisSaver


class _KeepLastOne:
    """Pins ``keep_last=1``; takes langgraph-checkpoint-redis's cache sizes, which tune
    in-memory caches this package does not have (they change no behaviour)."""

    def __init__(
        self,
        *args: Any,
        keep_last: int = 1,
        key_cache_max_size: int | None = None,
        channel_cache_max_size: int | None = None,
        **kwargs: Any,
    ) -> None:
        if keep_last != 1:
            raise ConfigurationError(
                f"a shallow saver keeps only the newest checkpoint (keep_last=1), got "
                f"keep_last={keep_last!r}: use RedisSaver(keep_last=...) instead"
            )
        super().__init__(*args, keep_last=1, **kwargs)


class ShallowRedisSaver(_KeepLastOne, RedisSaver):
    """``RedisSaver(keep_last=1)``: only the newest checkpoint of each thread and
    namespace is kept (plus what a read of it needs)."""


class AsyncShallowRedisSaver(_KeepLastOne, AsyncRedisSaver):
    """``AsyncRedisSaver(keep_last=1)``."""
