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
from functools import partial
from typing import Any

try:
    from langchain.agents.middleware import AgentMiddleware, ModelResponse
except ImportError as exc:  # pragma: no cover - exercised only without langchain
    raise ImportError(
        "ToolLedger.middleware() needs LangChain's create_agent: "
        "pip install 'langgraph-durable[agents]'"
    ) from exc
from langchain_core.messages import AIMessage
from langgraph.config import get_config

from langgraph_durable.ledger.context import LedgerContext
from langgraph_durable.ledger.integrations.tool_calls import awrap_tool_call, wrap_tool_call
from langgraph_durable.ledger.journal import journaled, model_call
from langgraph_durable.ledger.sequences import arun, run
from langgraph_durable.ledger.wiring import MODEL_ADVICE, refuse_sync_on_loop


class LedgerMiddleware(AgentMiddleware):
    """Routes every tool call of a ``create_agent`` agent through a ``ToolLedger`` and,
    with ``journal_models`` (the default), journals every model call."""

    def __init__(self, lctx: LedgerContext, *, journal_models: bool = True) -> None:
        super().__init__()
        self.lctx = lctx
        self.journal_models = journal_models

    def wrap_tool_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        return wrap_tool_call(self.lctx, request, handler)

    async def awrap_tool_call(self, request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
        return await awrap_tool_call(self.lctx, request, handler)

    def wrap_model_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        """Replay the recorded response of this model call, or call and record it."""
        call = (
            model_call(self.lctx, get_config(), request.messages) if self.journal_models else None
        )
        if call is None:
            return handler(request)
        saver = call.lctx.recording_saver
        refuse_sync_on_loop(saver, MODEL_ADVICE)
        return _normalized(run(saver, journaled(call, partial(handler, request), _kept, _response)))

    async def awrap_model_call(self, request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
        """``wrap_model_call`` for async runs."""
        call = (
            model_call(self.lctx, get_config(), request.messages) if self.journal_models else None
        )
        if call is None:
            return await handler(request)
        steps = journaled(call, partial(handler, request), _kept, _response)
        return _normalized(await arun(call.lctx.recording_saver, steps))


def _kept(response: Any) -> dict[str, Any]:
    """What is recorded of a handler's response."""
    return _stored(_normalized(response))


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
