"""``ledger.model(chat_model)``: a chat model whose calls inside a graph task are journaled.

Owns the wrapper hand-written agents call in their nodes. ``invoke``/``ainvoke`` replay
the recorded answer at the call's place or call the model and record its answer;
``stream``/``astream`` record the aggregated message once the stream completes (a stream
not read to the end records nothing) and replay the recorded message as one chunk.
``batch``/``abatch`` run their inputs one after another, so each has a stable place.
``bind_tools``, ``with_structured_output`` and ``bind``/``with_config`` return models
that stay journaled; any other attribute is the wrapped model's. Outside a checkpointed
graph task the model is simply called. Where and how answers are recorded:
``journal.py``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Sequence
from functools import partial
from typing import Any

from langchain_core.runnables import Runnable, RunnableConfig, ensure_config
from langchain_core.runnables.config import get_config_list

from langgraph_durable.core.ops import Plan, traced
from langgraph_durable.ledger.context import LedgerContext
from langgraph_durable.ledger.journal import (
    ModelCall,
    give_back,
    journaled,
    model_call,
    opened,
    record,
)
from langgraph_durable.ledger.sequences import arun, run
from langgraph_durable.ledger.wiring import MODEL_ADVICE, refuse_sync_on_loop


class JournaledModel(Runnable[Any, Any]):
    """A chat model (any ``Runnable``) whose calls are journaled by a ``ToolLedger``."""

    def __init__(self, lctx: LedgerContext, model: Runnable[Any, Any]) -> None:
        self.lctx = lctx
        self.model = model

    def __repr__(self) -> str:
        return f"JournaledModel({self.model!r})"

    def __getattr__(self, name: str) -> Any:  # only for what this class lacks
        if name in ("lctx", "model"):  # not set yet (copy, unpickling): no recursion
            raise AttributeError(name)
        return getattr(self.model, name)

    # -- models that stay journaled -----------------------------------------------------
    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> JournaledModel:
        """The wrapped model's ``bind_tools``, journaled."""
        return JournaledModel(self.lctx, self.model.bind_tools(tools, **kwargs))  # type: ignore[attr-defined]

    def with_structured_output(self, schema: Any, **kwargs: Any) -> JournaledModel:
        """The wrapped model's ``with_structured_output``, journaled (the parsed output
        must load under the saver's allowlist: add its class to ``allowed_types=``)."""
        structured = self.model.with_structured_output(schema, **kwargs)  # type: ignore[attr-defined]
        return JournaledModel(self.lctx, structured)

    # -- calls ----------------------------------------------------------------------
    def invoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        call = model_call(self.lctx, ensure_config(config), input)
        if call is None:
            return self.model.invoke(input, config, **kwargs)
        saver = call.lctx.recording_saver
        refuse_sync_on_loop(saver, MODEL_ADVICE)
        return run(saver, journaled(call, partial(self.model.invoke, input, config, **kwargs)))

    async def ainvoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        call = model_call(self.lctx, ensure_config(config), input)
        if call is None:
            return await self.model.ainvoke(input, config, **kwargs)
        answer = partial(self.model.ainvoke, input, config, **kwargs)
        return await arun(call.lctx.recording_saver, journaled(call, answer))

    def stream(
        self, input: Any, config: RunnableConfig | None = None, **kwargs: Any
    ) -> Iterator[Any]:
        call = model_call(self.lctx, ensure_config(config), input)
        if call is None:
            yield from self.model.stream(input, config, **kwargs)
            return
        saver = call.lctx.recording_saver
        refuse_sync_on_loop(saver, MODEL_ADVICE)
        if run(saver, opened(call)).recorded is not None:
            yield call.recorded.result  # type: ignore[union-attr]
            return
        whole = None
        try:
            for chunk in self.model.stream(input, config, **kwargs):
                whole = chunk if whole is None else whole + chunk
                yield chunk
        except Exception:  # not GeneratorExit: a stream not read to the end keeps its place
            give_back(call)
            raise
        saver.drive(_recorded(call, whole))

    async def astream(
        self, input: Any, config: RunnableConfig | None = None, **kwargs: Any
    ) -> AsyncIterator[Any]:
        call = model_call(self.lctx, ensure_config(config), input)
        if call is None:
            async for chunk in self.model.astream(input, config, **kwargs):
                yield chunk
            return
        saver = call.lctx.recording_saver
        if (await arun(saver, opened(call))).recorded is not None:
            yield call.recorded.result  # type: ignore[union-attr]
            return
        whole = None
        try:
            async for chunk in self.model.astream(input, config, **kwargs):
                whole = chunk if whole is None else whole + chunk
                yield chunk
        except Exception:
            give_back(call)
            raise
        await saver.adrive(_recorded(call, whole))

    def batch(
        self,
        inputs: list[Any],
        config: RunnableConfig | list[RunnableConfig] | None = None,
        **kwargs: Any,
    ) -> list[Any]:
        """``Runnable.batch``, one input after another: each call gets a stable place."""
        return super().batch(inputs, _in_order(config, len(inputs)), **kwargs)

    async def abatch(
        self,
        inputs: list[Any],
        config: RunnableConfig | list[RunnableConfig] | None = None,
        **kwargs: Any,
    ) -> list[Any]:
        """``Runnable.abatch``, one input after another: each call gets a stable place."""
        return await super().abatch(inputs, _in_order(config, len(inputs)), **kwargs)


def _recorded(call: ModelCall, whole: Any) -> Plan[None]:
    """A stream's answer recorded, as the saver operation ``ledger.record`` (as for
    ``invoke``: ``sequences.py`` names each plan it drives)."""
    return traced("ledger.record", record(call, whole), call.ctx.place.thread_id)


def _in_order(config: RunnableConfig | list[RunnableConfig] | None, n: int) -> list[Any]:
    # Calls claim their places as they start: concurrent ones would claim them in any order.
    return [{**c, "max_concurrency": 1} for c in get_config_list(config, n)]
