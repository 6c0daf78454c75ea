"""The ledger as an ``AgentMiddleware`` for LangChain's ``create_agent``.

Routes every tool call through the ledger, and journals every model call
(``ledger/journal.py``): a replayed model step returns the recorded ``ModelResponse``
(its messages and ``structured_response``) instead of asking the model again. The
journal records what this middleware's handler returned, so middleware listed *after*
it (inside) is not run again on replay, and a ``Command`` such middleware returns with
its response is not replayed: list that middleware before ``ledger.middleware()``.

Needs the optional ``langchain`` package (``pip install 'langgraph-durable[agents]'``);
importing this module without it raises ``ImportError`` naming the extra.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Protocol

try:
    from langchain.agents.middleware import AgentMiddleware, ModelResponse
except ImportError as exc:  # pragma: no cover - exercised only without langchain
    raise ImportError(
        "ToolLedger.middleware() needs LangChain's create_agent: "
        "pip install 'langgraph-durable[agents]'"
    ) from exc
from langchain_core.messages import AIMessage
from langgraph.config import get_config


class CallLedger(Protocol):
    """What the middleware needs of a ``ToolLedger`` (it is built by
    ``ToolLedger.middleware()``, so it names no class above it)."""

    def wrap_tool_call(self, request: Any, handler: Callable[[Any], Any]) -> Any: ...
    async def awrap_tool_call(
        self, request: Any, handler: Callable[[Any], Awaitable[Any]]
    ) -> Any: ...
    def open_model_call(self, config: Any, messages: Any) -> Any: ...
    async def aopen_model_call(self, config: Any, messages: Any) -> Any: ...
    def abandon_model_call(self, call: Any) -> None: ...
    def close_model_call(self, call: Any, response: Any) -> None: ...
    async def aclose_model_call(self, call: Any, response: Any) -> None: ...


class LedgerMiddleware(AgentMiddleware):
    """Routes every tool call of a ``create_agent`` agent through a ``ToolLedger`` and,
    with ``journal_models`` (the default), journals every model call."""

    def __init__(self, ledger: CallLedger, *, journal_models: bool = True) -> None:
        super().__init__()
        self.ledger = ledger
        self.journal_models = journal_models

    def wrap_tool_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        return self.ledger.wrap_tool_call(request, handler)

    async def awrap_tool_call(self, request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
        return await self.ledger.awrap_tool_call(request, handler)

    def wrap_model_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        """Replay the recorded response of this model call, or call and record it."""
        call = (
            self.ledger.open_model_call(get_config(), request.messages)
            if self.journal_models
            else None
        )
        if call is None:
            return handler(request)
        if call.recorded is not None:
            return _response(call.recorded.result)
        try:
            response = _normalized(handler(request))
        except Exception:
            self.ledger.abandon_model_call(call)
            raise
        self.ledger.close_model_call(call, _stored(response))
        return response

    async def awrap_model_call(self, request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
        """The async twin of ``wrap_model_call``."""
        call = (
            await self.ledger.aopen_model_call(get_config(), request.messages)
            if self.journal_models
            else None
        )
        if call is None:
            return await handler(request)
        if call.recorded is not None:
            return _response(call.recorded.result)
        try:
            response = _normalized(await handler(request))
        except Exception:
            self.ledger.abandon_model_call(call)
            raise
        await self.ledger.aclose_model_call(call, _stored(response))
        return response


def _normalized(response: Any) -> ModelResponse:
    # An inner middleware may return a bare AIMessage; LangChain normalizes it the same way.
    if isinstance(response, AIMessage):
        return ModelResponse(result=[response])
    return response  # type: ignore[no-any-return]


def _stored(response: ModelResponse) -> dict[str, Any]:
    """A ``ModelResponse`` as plain data the strict serializer stores."""
    return {"result": list(response.result), "structured_response": response.structured_response}


def _response(stored: dict[str, Any]) -> ModelResponse:
    return ModelResponse(
        result=list(stored["result"]), structured_response=stored["structured_response"]
    )
