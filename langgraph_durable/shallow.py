"""``ShallowRedisSaver`` / ``AsyncShallowRedisSaver``: langgraph-checkpoint-redis's names
for a saver that keeps only the newest checkpoint of each thread and namespace.

Owns the names and what they promise: each is its saver with ``keep_last=1``
(retention keeps what a read may still need besides: the newest checkpoint that
verifies, and the ancestors its DeltaChannels are rebuilt from), and each reads as
keeping exactly one: ``list`` gives one checkpoint per thread and namespace, and
``get_tuple`` the newest whatever ``checkpoint_id`` asks, with no ``parent_config``, as
LangGraph's ShallowPostgresSaver and langgraph-checkpoint-redis's ShallowRedisSaver do.
"""

from __future__ import annotations

from typing import Any

from langgraph_durable.aio import AsyncRedisSaver
from langgraph_durable.core.errors import ConfigurationError
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
        # ``list`` and ``get_tuple`` show the one checkpoint, as the shallow savers of
        # LangGraph (Postgres) and langgraph-checkpoint-redis do: not the few more that
        # amortized retention has not collected yet
        self.core.newest_only = True


class ShallowRedisSaver(_KeepLastOne, RedisSaver):
    """``RedisSaver(keep_last=1)``: only the newest checkpoint of each thread and
    namespace is kept (plus what a read of it needs)."""


class AsyncShallowRedisSaver(_KeepLastOne, AsyncRedisSaver):
    """``AsyncRedisSaver(keep_last=1)``."""
