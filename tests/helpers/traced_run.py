"""A traced run, in a process of its own: the OpenTelemetry SDK configured globally (as an
application does) and nothing passed to the saver. A ToolNode agent's worker dies after
its tools ran; the next run gets their results from the ledger; then a fresh saver reads
a damaged newest checkpoint. Prints what the SDK recorded, as JSON, on stdout.

    python -m tests.helpers.traced_run REDIS_URL KEY_PREFIX EFFECTS_FILE
"""

from __future__ import annotations

import json
import sys
from typing import Any

from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from langgraph_durable import RedisSaver, ToolLedger
from tests.helpers.ledger_agent import POLICIES, START_INPUT, Effects, agent_graph
from tests.helpers.ledger_crashes import CONFIG, Crash, crash_after_result
from tests.helpers.redis_keys import flip_last_bit
from tests.integration.test_ledger import crash_graph


def main(url: str, prefix: str, effects_file: str) -> dict[str, Any]:
    spans = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    trace.set_tracer_provider(tracer_provider)
    reader = InMemoryMetricReader()
    metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))
    app = trace.get_tracer("the-application")
    effects = Effects(effects_file)

    with RedisSaver.from_conn_string(url, key_prefix=prefix) as saver:
        ledger = ToolLedger(saver, policies=POLICIES)
        # every call of the step settles before the crash is seen (``together``): what the
        # ledger holds then does not depend on thread timing
        dying = crash_graph(ledger, effects, wrap=crash_after_result(ledger, "charge"))
        with app.start_as_current_span("first run"):
            try:
                dying.compile(checkpointer=saver).invoke(START_INPUT, CONFIG)
            except Crash:
                pass  # the worker died after charge's result was recorded
        with app.start_as_current_span("second run"):
            agent_graph(ledger, effects).compile(checkpointer=saver).invoke(None, CONFIG)
        newest = next(iter(saver.list(CONFIG, limit=1)))
        member = saver.keys.checkpoint_member("", newest.checkpoint["id"])
        flip_last_bit(saver.client, saver.keys.thread("t").cp, member)
    fresh = RedisSaver.from_conn_string(url, key_prefix=prefix)
    with fresh as fresh_saver, app.start_as_current_span("fresh read"):
        fresh_saver.get_tuple(CONFIG)

    names = {s.context.span_id: s.name for s in spans.get_finished_spans()}
    recorded: dict[str, Any] = {
        "damaged": newest.checkpoint["id"],
        "charge_effects": [
            e["key"] for e in effects.lines() if (e["tool"], e["kind"]) == ("charge", "effect")
        ],
        "spans": [
            {
                "name": s.name,
                "kind": s.kind.name,
                "parent": names.get(s.parent.span_id) if s.parent else None,
                "scope": s.instrumentation_scope.name,
                "attributes": dict(s.attributes or {}),
                "events": [{"name": e.name, **dict(e.attributes or {})} for e in s.events],
            }
            for s in spans.get_finished_spans()
        ],
        "metrics": {},
    }
    data = reader.get_metrics_data()
    for resource in data.resource_metrics if data else ():
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                recorded["metrics"][metric.name] = [
                    {
                        "attributes": dict(p.attributes or {}),
                        "value": getattr(p, "value", None),
                        "count": getattr(p, "count", None),
                    }
                    for p in metric.data.data_points
                ]
    return recorded


if __name__ == "__main__":
    print(json.dumps(main(*sys.argv[1:4]), default=str))
