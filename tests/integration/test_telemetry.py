"""What the saver shows OpenTelemetry, on a real Redis with the real SDK.

The global run (``tests/helpers/traced_run.py``, in a process of its own: a global
provider can be set once) configures the SDK as an application does and passes nothing
to the saver. The other tests hand the saver their own providers."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from langgraph_durable import AsyncRedisSaver, LeaseHeldError, RedisSaver
from tests.helpers import graphs

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def traced(redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    import uuid

    import redis

    from tests.helpers.redis_keys import delete_prefix

    prefix = f"lgdtrace{uuid.uuid4().hex[:8]}"
    effects = tmp_path_factory.mktemp("traced") / "effects"
    done = subprocess.run(
        [sys.executable, "-m", "tests.helpers.traced_run", redis_url, prefix, str(effects)],
        cwd=ROOT,
        check=False,
        capture_output=True,
        text=True,
        timeout=180,
    )
    recorded = json.loads(done.stdout) if done.returncode == 0 else {}
    page = effects.parent / "thread t.html"
    from tests.integration.test_timeline import timeline

    drawn = timeline("t", page, redis_url, prefix)  # that very thread, before it goes
    client = redis.Redis.from_url(redis_url)
    delete_prefix(client, prefix)
    client.close()
    assert done.returncode == 0, done.stderr
    assert drawn.returncode == 0, drawn.stderr
    recorded["page"] = page
    return recorded


def spans(recorded: dict[str, Any], name: str, parent: str | None = None) -> list[dict[str, Any]]:
    return [s for s in recorded["spans"] if s["name"] == name and parent in (None, s["parent"])]


def test_put_and_get_tuple_are_redis_client_spans_under_the_callers_span(
    traced: dict[str, Any],
) -> None:
    for name in ("put", "get_tuple", "put_writes"):
        found = spans(traced, name, "second run")
        assert found, name
        for span in found:
            attrs = span["attributes"]
            assert span["kind"] == "CLIENT" and span["scope"] == "langgraph_durable"
            assert attrs["db.system.name"] == "redis" and attrs["db.operation.name"] == name
            assert attrs["server.address"] == "127.0.0.1" and attrs["server.port"] > 0
            assert attrs["langgraph.thread_id"] == "t"
    for put in spans(traced, "put"):
        assert put["attributes"]["lgd.round_trips"] == 1  # one round trip per write
        assert put["attributes"]["lgd.bytes_written"] > 0
        assert put["attributes"]["langgraph.checkpoint_id"]


def test_the_replay_and_the_fallback_show_in_spans_and_in_metrics(
    traced: dict[str, Any],
) -> None:
    replays = [
        e
        for span in spans(traced, "ledger.begin", "second run")
        for e in span["events"]
        if e["name"] == "lgd.replay"
    ]
    # the worker died after the three calls of round 0 ran: each answered from the ledger
    assert sorted(e["lgd.call.name"] for e in replays) == ["charge", "create_ticket", "send_email"]
    assert len(traced["charge_effects"]) == len(set(traced["charge_effects"])) == 3
    (fresh,) = spans(traced, "get_tuple", "fresh read")
    events = {e["name"]: e for e in fresh["events"]}
    assert events["lgd.fallback"]["lgd.skipped"].startswith(traced["damaged"])
    assert events["lgd.record.damaged"]["lgd.checkpoint_id"] == traced["damaged"]
    assert events["lgd.quarantine"]["lgd.count"] == 1

    metrics = traced["metrics"]
    assert [p["value"] for p in metrics["lgd.ledger.replays"]] == [3]
    assert [p["value"] for p in metrics["lgd.fallbacks"]] == [1]
    assert [p["value"] for p in metrics["lgd.records.damaged"]] == [1]
    durations = {
        p["attributes"]["db.operation.name"]: p["count"]
        for p in metrics["db.client.operation.duration"]
    }
    assert durations["put"] == len(spans(traced, "put")) and durations["get_tuple"] >= 3
    assert metrics["lgd.checkpoints.written"][0]["value"] == durations["put"]


def test_the_timeline_of_the_traced_thread_renders_in_chromium(
    traced: dict[str, Any], tmp_path: Path
) -> None:
    from tests.integration.test_timeline import CHROMIUM, Dom, rendered

    if CHROMIUM is None:
        if os.environ.get("LGD_REQUIRE_CHROMIUM"):
            pytest.fail("chromium is not installed, and .ci/run requires it")
        pytest.skip("Debian's chromium is not installed (.ci/run installs it)")
    dom = Dom()
    dom.feed(rendered(traced["page"], tmp_path))
    text = " ".join(" ".join(dom.text).split())
    assert "1 quarantined" in text  # the damaged newest checkpoint the fresh read moved
    assert traced["damaged"] in text
    assert dom.classes.count("call") >= 3 and "charge" in text and "send_email" in text


class Recorded:
    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.reader = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[self.reader])

    def options(self, **more: Any) -> dict[str, Any]:
        return {
            "tracer_provider": self.tracer_provider,
            "meter_provider": self.meter_provider,
            **more,
        }

    def metric(self, name: str) -> list[Any]:
        data = self.reader.get_metrics_data()
        return [
            p
            for r in data.resource_metrics
            for s in r.scope_metrics
            for m in s.metrics
            if m.name == name
            for p in m.data.data_points
        ]


def test_async_spans_nest_under_the_callers_span_and_thread_ids_can_be_hashed(
    redis_url: str, key_prefix: str
) -> None:
    rec = Recorded()
    app = rec.tracer_provider.get_tracer("the-application")

    async def run() -> None:
        async with AsyncRedisSaver.from_conn_string(
            redis_url, key_prefix=key_prefix, **rec.options(trace_thread_ids="hashed")
        ) as saver:
            graph = graphs.react_graph(rounds=1).compile(checkpointer=saver)
            with app.start_as_current_span("request"):
                await graph.ainvoke(graphs.react_input(), {"configurable": {"thread_id": "secret"}})
                await saver.adelete_thread("secret")

    asyncio.run(run())
    finished = rec.exporter.get_finished_spans()
    (request,) = [s for s in finished if s.name == "request"]
    ours = [s for s in finished if s.instrumentation_scope.name == "langgraph_durable"]
    assert {s.name for s in ours} >= {"put", "put_writes", "get_tuple", "delete_thread"}
    assert all(s.parent is not None and s.parent.span_id == request.context.span_id for s in ours)
    recorded_ids = {s.attributes.get("langgraph.thread_id") for s in ours}
    assert recorded_ids and all(i and i.startswith("sha256:") for i in recorded_ids)
    assert "secret" not in str([dict(s.attributes) for s in ours])


@pytest.mark.parametrize("wait", [0.0, 0.3])
def test_a_refused_lease_is_one_error_span_and_one_conflict_however_long_it_waited(
    redis_url: str, key_prefix: str, wait: float
) -> None:
    rec = Recorded()
    with (
        RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix) as holder,
        RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix, **rec.options()) as other,
        holder.lease("t", ttl=30),
        pytest.raises(LeaseHeldError),
        other.lease("t", ttl=30, wait=wait),
    ):
        pass
    finished = rec.exporter.get_finished_spans()
    (refused,) = [s for s in finished if s.name == "acquire_lease"]  # the polls: no span
    assert refused.status.status_code.name == "ERROR"
    assert refused.attributes["error.type"] == "LeaseHeldError"
    (gave_up,) = [s for s in finished if s.name == "lgd.lease.refused"]
    assert [e.name for e in gave_up.events] == ["lgd.lease.refused"]
    (conflict,) = rec.metric("lgd.lease.conflicts")
    assert conflict.value == 1 and conflict.attributes["lgd.lease.outcome"] == "refused"


def test_escalations_waiting_and_their_age_are_gauges(saver: RedisSaver, effects: Any) -> None:
    from tests.integration.test_ledger_operators import crashed, waiting_after_a_resume

    rec = Recorded()
    graph, ledger = crashed(saver, effects, "send_email")
    assert ledger.observe_escalations(rec.meter_provider)
    assert [p.value for p in rec.metric("lgd.escalations.waiting")] == [0]  # not asked yet
    (pending,) = waiting_after_a_resume(graph, ledger)
    assert [p.value for p in rec.metric("lgd.escalations.waiting")] == [1]
    (age,) = [p.value for p in rec.metric("lgd.escalations.oldest_age")]
    assert age >= 0
    ledger.resolve("t", pending.idempotency_key, "retry", reason="checked", by="ops")
    assert [p.value for p in rec.metric("lgd.escalations.waiting")] == [0]


def test_bytes_written_count_every_write_path_and_no_read(redis_url: str, key_prefix: str) -> None:
    """``lgd.bytes_written``: a put, a put_writes and the ledger's writes (scripts inside a
    batch) count what they send; a read counts nothing; and all of it is no more than
    the bytes the server received meanwhile (INFO stats)."""
    import redis

    from langgraph_durable import ToolLedger
    from tests.helpers.ledger_agent import START_INPUT, Effects, agent_graph

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    admin = redis.Redis.from_url(redis_url)
    before = admin.info("stats")["total_net_input_bytes"]
    with RedisSaver.from_conn_string(
        redis_url, key_prefix=key_prefix, tracer_provider=provider
    ) as saver:
        ledger = ToolLedger(saver, policies={"charge": "retry"})
        graph = agent_graph(ledger, Effects(os.devnull)).compile(checkpointer=saver)
        config = {"configurable": {"thread_id": "bytes"}}
        graph.invoke(START_INPUT, config)
        graph.get_state(config)
    received = admin.info("stats")["total_net_input_bytes"] - before
    admin.close()
    written: dict[str, list[int]] = {}
    for span in exporter.get_finished_spans():
        written.setdefault(span.name, []).append(int(span.attributes.get("lgd.bytes_written", 0)))
    for name in ("put", "put_writes", "ledger.begin", "ledger.finish"):
        assert written.get(name) and all(n > 0 for n in written[name]), (name, written.get(name))
    assert all(n == 0 for n in written.get("get_tuple", [0])), written.get("get_tuple")
    assert 0 < sum(sum(v) for v in written.values()) <= received


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_one_span_around_a_run_makes_one_trace_of_it(
    redis_url: str, key_prefix: str, mode: str, tmp_path: Path
) -> None:
    """The recipe of observability.md: LangGraph opens no span, so the application's
    span around ``invoke`` is the parent of every saver and ledger span of the run, in
    LangGraph's worker threads and async tasks too. Without it: a trace per operation."""
    from langgraph_durable import ToolLedger
    from tests.helpers.ledger_agent import START_INPUT, Effects, agent_graph

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("test-app")

    def traces(thread: str, wrapped: bool) -> set[int]:
        exporter.clear()
        config = {"configurable": {"thread_id": f"{mode}-{thread}"}}
        effects = Effects(str(tmp_path / f"effects-{thread}"))
        if mode == "sync":
            with RedisSaver.from_conn_string(
                redis_url, key_prefix=key_prefix, tracer_provider=provider
            ) as saver:
                graph = agent_graph(ToolLedger(saver), effects).compile(checkpointer=saver)
                if wrapped:
                    with tracer.start_as_current_span("agent run"):
                        graph.invoke(START_INPUT, config)
                else:
                    graph.invoke(START_INPUT, config)
        else:

            async def run() -> None:
                async with AsyncRedisSaver.from_conn_string(
                    redis_url, key_prefix=key_prefix, tracer_provider=provider
                ) as saver:
                    graph = agent_graph(ToolLedger(saver), effects).compile(checkpointer=saver)
                    if wrapped:
                        with tracer.start_as_current_span("agent run"):
                            await graph.ainvoke(START_INPUT, config)
                    else:
                        await graph.ainvoke(START_INPUT, config)

            asyncio.run(run())
        spans = exporter.get_finished_spans()
        names = {s.name for s in spans}
        assert {"put", "ledger.begin", "ledger.finish"} <= names, names
        return {s.context.trace_id for s in spans}

    assert len(traces("bare", wrapped=False)) > 1  # why the recipe exists
    assert len(traces("wrapped", wrapped=True)) == 1
