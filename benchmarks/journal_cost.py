"""What journaling a model call costs: the same fake model called in a real graph task
plain and through ``ledger.model(...)``, in one run, against a real Redis.

    python benchmarks/journal_cost.py [ROUNDS]     # embedded Redis, or REDIS_URL

Each round is one graph step (a fresh task, as an agent's model step is) whose node
calls the plain model and the journaled one, in alternating order; the figure is the
median difference, with the Redis commands (round trips) each journaled call made and
the size of the record it wrote. The answer is a realistic AI message: 600 characters
of text and two tool calls; the request, a 10-message conversation.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
import uuid
from typing import Any

import redis
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

from langgraph_durable import RedisSaver, ToolLedger
from langgraph_durable.tools.embedded import resolve_url

ANSWER = AIMessage(
    content="I will look that up and send the summary. " * 14,
    tool_calls=[
        {"name": "search", "args": {"query": "quarterly revenue by region"}, "id": "call_a1"},
        {"name": "send_email", "args": {"to": "cfo@example.com", "body": "x" * 80}, "id": "b2"},
    ],
)
REQUEST = [HumanMessage(content=f"message {i}: " + "words " * 40) for i in range(10)]


class FixedModel(BaseChatModel):
    @property
    def _llm_type(self) -> str:
        return "fixed"

    def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kw: Any) -> Any:
        return ChatResult(generations=[ChatGeneration(message=ANSWER)])


class State(TypedDict):
    n: int


def scripts(client: redis.Redis) -> int:
    """Scripts Redis ran so far: every plan step of the saver is one, one round trip each
    (the commands a script runs inside Redis are no round trips)."""
    stats = client.info("commandstats")
    return sum(stats.get(f"cmdstat_{c}", {}).get("calls", 0) for c in ("evalsha", "evalsha_ro"))


def main() -> None:
    url = resolve_url(None)
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 300
    prefix = f"lgdbench-{uuid.uuid4().hex[:6]}"
    client = redis.Redis.from_url(url)
    plain_us: list[float] = []
    journaled_us: list[float] = []
    commands: list[int] = []
    with RedisSaver.from_conn_string(url, key_prefix=prefix) as saver:
        ledger = ToolLedger(saver)
        model = FixedModel()
        journaled = ledger.model(model)

        def node(state: State) -> dict[str, int]:
            order = (model, journaled) if state["n"] % 2 else (journaled, model)
            for m in order:
                before = scripts(client) if m is journaled else 0
                t0 = time.perf_counter()
                m.invoke(REQUEST)
                took = (time.perf_counter() - t0) * 1e6
                if m is journaled:
                    commands.append(scripts(client) - before)
                    journaled_us.append(took)
                else:
                    plain_us.append(took)
            return {"n": state["n"] + 1}

        builder = StateGraph(State)
        builder.add_node("agent", node)
        builder.add_edge(START, "agent")
        builder.add_edge("agent", END)
        graph = builder.compile(checkpointer=saver)
        for i in range(rounds):
            # "sync": no checkpoint write of LangGraph's runs beside the node's calls
            graph.invoke({"n": i}, {"configurable": {"thread_id": f"t{i % 20}"}}, durability="sync")
        entry = next(e for e in ledger.entries("t0") if e.model_call)
        record = client.hstrlen(saver.keys.thread("t0").lg, entry.field)
        for i in range(20):
            saver.delete_thread(f"t{i}")
    warm = slice(20, None)
    plain = statistics.median(plain_us[warm])
    with_journal = statistics.median(journaled_us[warm])
    result = {
        "rounds": rounds,
        "plain_model_call_us": round(plain),
        "journaled_model_call_us": round(with_journal),
        "journal_cost_us": round(with_journal - plain),
        "round_trips_per_call": statistics.median(commands),
        "record_bytes": record,
    }
    print(
        f"model call, medians of {rounds - 20}: plain {plain:.0f} µs, journaled "
        f"{with_journal:.0f} µs: +{with_journal - plain:.0f} µs and "
        f"{result['round_trips_per_call']} round trips per call "
        f"(the task's read and the write), a {record}-byte record"
    )
    print(json.dumps(result))


if __name__ == "__main__":
    main()
