"""What OpenTelemetry costs a superstep: the same graph, in one run, against a real Redis,
with the saver's telemetry off (as without the ``otel`` extra), with the API and no SDK
(the global no-op providers), and with the SDK recording every span and metric.

    python benchmarks/telemetry_cost.py [ROUNDS]     # embedded Redis, or REDIS_URL

Each round runs one superstep (a ``graph.invoke`` of a one-node graph whose state, a
counter and 2 KB of text, is rewritten at every step: a ``get_tuple``, ``put_writes``
and ``put``s) on each of the three savers in turn, in a rotating order; the figures are medians per superstep and
their ratio to the saver without telemetry. The recording SDK exports spans through a
``BatchSpanProcessor`` to an exporter that drops them, and metrics to an in-memory
reader, so what is measured is the instrumentation, not a network.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
import uuid
from collections.abc import Sequence
from typing import Any

import redis
from langgraph.graph import START, StateGraph
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from typing_extensions import TypedDict

from langgraph_durable import RedisSaver
from langgraph_durable.io.telemetry import NO_TELEMETRY
from langgraph_durable.tools.embedded import resolve_url


class Dropped(SpanExporter):
    def export(self, spans: Sequence[Any]) -> SpanExportResult:
        return SpanExportResult.SUCCESS


class State(TypedDict):
    n: int
    text: str


def graph_for(saver: RedisSaver) -> Any:
    builder = StateGraph(State)
    builder.add_node("step", lambda s: {"n": s["n"] + 1, "text": f"{s['n']:06d}" + "x" * 2048})
    builder.add_edge(START, "step")
    return builder.compile(checkpointer=saver)


def main(rounds: int = 300) -> dict[str, Any]:
    url = resolve_url(None)
    prefix = f"lgdbench-otel-{uuid.uuid4().hex[:8]}"
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(BatchSpanProcessor(Dropped()))
    meter_provider = MeterProvider(metric_readers=[InMemoryMetricReader()])
    savers = {
        "off": RedisSaver.from_conn_string(url, key_prefix=prefix + "-off"),
        "api, no SDK": RedisSaver.from_conn_string(url, key_prefix=prefix + "-api"),
        "SDK recording": RedisSaver.from_conn_string(
            url,
            key_prefix=prefix + "-sdk",
            tracer_provider=tracer_provider,
            meter_provider=meter_provider,
        ),
    }
    times: dict[str, list[float]] = {name: [] for name in savers}
    try:
        opened = {name: cm.__enter__() for name, cm in savers.items()}
        opened["off"].telemetry = NO_TELEMETRY  # what a saver has without the extra
        graphs = {name: graph_for(s) for name, s in opened.items()}
        config = {"configurable": {"thread_id": "bench"}}
        for graph in graphs.values():  # warm caches and connections
            for n in range(10):
                graph.invoke({"n": n, "text": ""}, config)
        names = list(graphs)
        for i in range(rounds):
            for name in names[i % 3 :] + names[: i % 3]:
                started = time.perf_counter()
                graphs[name].invoke({"n": i, "text": ""}, config)
                times[name].append(time.perf_counter() - started)
    finally:
        for cm in savers.values():
            cm.__exit__(None, None, None)
        tracer_provider.shutdown()
        client = redis.Redis.from_url(url)
        for key in client.scan_iter(match=f"{prefix}-*"):
            client.delete(key)
        client.close()
    medians = {name: statistics.median(t) * 1e6 for name, t in times.items()}
    return {
        "rounds": rounds,
        "superstep_us": {name: round(m, 1) for name, m in medians.items()},
        "ratio_to_off": {name: round(m / medians["off"], 3) for name, m in medians.items()},
    }


if __name__ == "__main__":
    print(json.dumps(main(int(sys.argv[1]) if len(sys.argv) > 1 else 300), indent=2))
