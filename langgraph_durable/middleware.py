"""The ledger as an ``AgentMiddleware`` for LangChain's ``create_agent``.

Needs the optional ``langchain`` package (``pip install 'langgraph-durable[agents]'``);
importing this module without it raises ``ImportError`` naming the extra.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Protocol

try:
    from langchain.agents.middleware import AgentMiddleware
except ImportError as exc:  # pragma: no cover - exercised only without langchain
    raise ImportError(
        "ToolLedger.middleware() needs LangChain's create_agent: "
        "pip install 'langgraph-durable[agents]'"
    ) from exc


class ToolCallWrapper(Protocol):
    """What the middleware routes tool calls through (``ToolLedger`` is one)."""

    def wrap_tool_call(self, request: Any, execute: Callable[[Any], Any]) -> Any: ...

    async def awrap_tool_call(
        self, request: Any, execute: Callable[[Any], Awaitable[Any]]
    ) -> Any: ...


class LedgerMiddleware(AgentMiddleware):
    """Routes every tool call of a ``create_agent`` agent through a ``ToolLedger``."""

    def __init__(self, ledger: ToolCallWrapper) -> None:
        super().__init__()
        self.ledger = ledger

    def wrap_tool_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        return self.ledger.wrap_tool_call(request, handler)

    async def awrap_tool_call(self, request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
        return await self.ledger.awrap_tool_call(request, handler)
