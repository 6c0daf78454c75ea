"""``langgraph_durable.embedded``: the embedded Redis server for trying things out
(defined in ``tools/embedded.py``)."""

from langgraph_durable.tools.embedded import EmbeddedRedis, resolve_url

__all__ = ["EmbeddedRedis", "resolve_url"]
