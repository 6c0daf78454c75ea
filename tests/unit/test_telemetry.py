"""io/telemetry.py with the real OpenTelemetry SDK (in-memory exporter and reader): the
span of one operation, its attributes and events, the metrics, thread ids hashed or left
out, and nothing at all when opentelemetry-api is missing."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry import trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from langgraph_durable.core.errors import ConfigurationError, LeaseHeldError
from langgraph_durable.core.ops import Script
from langgraph_durable.io.telemetry import (
    NO_TELEMETRY,
    OtelTelemetry,
    create_telemetry,
    server_attributes,
)

SERVER = server_attributes({"host": "127.0.0.1", "port": 6390, "db": 0})


class Recorded:
    def __init__(self, thread_ids: str = "plain") -> None:
        self.spans = InMemorySpanExporter()
        self.tracer_provider = tracer_provider = TracerProvider()
        tracer_provider.add_span_processor(SimpleSpanProcessor(self.spans))
        self.reader = InMemoryMetricReader()
        self.telemetry = create_telemetry(
            tracer_provider,
            MeterProvider(metric_readers=[self.reader]),
            trace_thread_ids=thread_ids,
            server=SERVER,
        )

    def metrics(self) -> dict[str, list[Any]]:
        found: dict[str, list[Any]] = {}
        data = self.reader.get_metrics_data()
        for resource in data.resource_metrics if data else ():
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    found.setdefault(metric.name, []).extend(metric.data.data_points)
        return found


def test_one_operation_is_one_client_span_with_the_database_conventions() -> None:
    rec = Recorded()
    scope = rec.telemetry.begin("put", "thread-1", "", "cp-1")
    scope.sending(Script("put_checkpoint", ["k"], [b"x" * 100, [b"y" * 20, "text"]]))
    scope.sent()
    scope.received([b"OK", None, [b"record", b""]])
    scope.note("lgd.fallback", {"lgd.skipped": 1})
    scope.end()
    (span,) = rec.spans.get_finished_spans()
    assert span.name == "put" and span.kind is SpanKind.CLIENT
    attrs = dict(span.attributes)
    assert attrs["db.system.name"] == "redis" and attrs["db.operation.name"] == "put"
    assert (attrs["server.address"], attrs["server.port"], attrs["db.namespace"]) == (
        "127.0.0.1",
        6390,
        "0",
    )
    assert attrs["langgraph.thread_id"] == "thread-1"
    assert attrs["langgraph.checkpoint_id"] == "cp-1"
    assert (attrs["lgd.round_trips"], attrs["lgd.records_read"], attrs["lgd.bytes_written"]) == (
        1,
        2,
        120,
    )
    assert [(e.name, dict(e.attributes)) for e in span.events] == [
        ("lgd.fallback", {"lgd.skipped": 1})
    ]
    metrics = rec.metrics()
    (duration,) = metrics["db.client.operation.duration"]
    assert duration.count == 1 and duration.attributes["db.operation.name"] == "put"
    assert [p.value for p in metrics["lgd.checkpoints.written"]] == [1]
    assert [p.value for p in metrics["lgd.bytes.written"]] == [120]
    assert [p.value for p in metrics["lgd.fallbacks"]] == [1]


def test_a_failed_operation_is_an_error_span_and_a_refused_lease_a_conflict() -> None:
    rec = Recorded()
    # a write refused because another worker holds the thread (an acquisition that
    # gives up is counted by the lease itself, once, however long it waited)
    scope = rec.telemetry.begin("put", "thread-1")
    scope.end(LeaseHeldError(thread_id="thread-1", holder="host:1:ab", expires_in=3.0))
    scope.end(RuntimeError("a second end"))  # ignored: an operation ends once
    (span,) = rec.spans.get_finished_spans()
    assert span.status.status_code is StatusCode.ERROR
    assert span.attributes["error.type"] == "LeaseHeldError"
    assert [e.name for e in span.events] == ["lgd.lease.refused", "exception"]
    metrics = rec.metrics()
    (conflict,) = metrics["lgd.lease.conflicts"]
    assert conflict.value == 1 and dict(conflict.attributes) == {"lgd.lease.outcome": "refused"}
    (duration,) = metrics["db.client.operation.duration"]
    assert duration.attributes["error.type"] == "LeaseHeldError"
    assert "lgd.checkpoints.written" not in metrics


def test_with_thread_ids_left_out_no_message_names_the_thread() -> None:
    rec = Recorded("omit")
    scope = rec.telemetry.begin("put", "user-4711-secret")
    scope.end(LeaseHeldError(thread_id="user-4711-secret", holder="h", expires_in=1.0))
    (span,) = rec.spans.get_finished_spans()
    assert "user-4711-secret" not in repr([dict(e.attributes) for e in span.events])
    assert "user-4711-secret" not in repr(dict(span.attributes))


def test_telemetry_that_raises_never_reaches_the_saver() -> None:
    class Broken(SimpleSpanProcessor):
        def on_end(self, span: Any) -> None:
            raise RuntimeError("an exporter of the application's")

        def on_start(self, span: Any, parent_context: Any = None) -> None:
            raise RuntimeError("an exporter of the application's")

    provider = TracerProvider()
    provider.add_span_processor(Broken(InMemorySpanExporter()))
    telemetry = create_telemetry(provider, None, trace_thread_ids="hashed")
    scope = telemetry.begin("put", "bad\ud800id")  # a thread id no codec takes, too
    if scope is not None:
        scope.note("lgd.fallback", {"lgd.skipped": "x" * 5000})
        scope.end()
    telemetry.event("lgd.replay", {}, "t")
    telemetry.count("lgd.replay", {})


@pytest.mark.parametrize(
    ("choice", "expected"), [("hashed", "sha256:"), ("omit", None), ("plain", "t-9")]
)
def test_thread_ids_are_recorded_as_given_hashed_or_not_at_all(
    choice: str, expected: str | None
) -> None:
    rec = Recorded(choice)
    rec.telemetry.begin("get_tuple", "t-9").end()
    (span,) = rec.spans.get_finished_spans()
    recorded = span.attributes.get("langgraph.thread_id")
    if expected is None:
        assert recorded is None
    else:
        assert recorded is not None and recorded.startswith(expected)
        assert choice != "hashed" or ("t-9" not in recorded and len(recorded) == 23)


def test_an_event_outside_a_plan_is_a_short_span_under_the_callers_span() -> None:
    rec = Recorded()
    app = rec.tracer_provider.get_tracer("the-application")
    with app.start_as_current_span("tools"):
        rec.telemetry.event("lgd.replay", {"lgd.call.name": "charge"}, "thread-1")
    replay, parent = rec.spans.get_finished_spans()
    assert parent.name == "tools" and replay.parent.span_id == parent.context.span_id
    assert [e.name for e in replay.events] == ["lgd.replay"]
    assert [p.value for p in rec.metrics()["lgd.ledger.replays"]] == [1]


def test_without_opentelemetry_nothing_is_recorded() -> None:
    def missing(name: str) -> None:
        raise ImportError(name)

    assert create_telemetry(importer=missing) is NO_TELEMETRY
    assert NO_TELEMETRY.begin("put", "t") is None
    with pytest.raises(ConfigurationError, match="trace_thread_ids"):
        create_telemetry(trace_thread_ids="sometimes")


def test_without_an_sdk_the_global_providers_record_nothing() -> None:
    telemetry = create_telemetry()  # the global providers: no SDK set in this process
    assert isinstance(telemetry, OtelTelemetry)
    if not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
        pytest.skip("another test set a global tracer provider")
    assert telemetry.begin("put", "t") is None  # nothing made, nothing computed
    telemetry.count("lgd.fallback", {})  # and nothing counted
    telemetry.event("lgd.replay", {}, "t")


def test_the_metrics_table_of_the_docs_names_every_instrument_and_only_those() -> None:
    from pathlib import Path

    from langgraph_durable.io.instruments import COUNTERS

    page = Path(__file__).resolve().parents[2] / "docs" / "operations" / "observability.md"
    if not page.exists():
        pytest.skip("docs/ not shipped here")
    table = page.read_text().split("## Metrics", 1)[1].split("\n## ", 1)[0]
    documented = {row.split("`")[1] for row in table.splitlines() if row.startswith("| `")}
    made = {name for name, _, _ in COUNTERS.values()} | {
        "db.client.operation.duration",
        "lgd.checkpoints.written",
        "lgd.bytes.written",
        "lgd.escalations.waiting",
        "lgd.escalations.oldest_age",
    }
    assert documented == made


@pytest.mark.parametrize(
    "config",
    [None, "a string", {"configurable": "x"}, {"configurable": {"thread_id": object()}}, {}],
)
def test_a_config_of_any_shape_leaves_the_plan_to_refuse_it(config: Any) -> None:
    from langgraph_durable.core.saver_core import where

    found = where(config)
    assert found[1:] == (None, None) and found[0] is None


def test_where_reads_a_config_as_the_plans_do() -> None:
    from langgraph_durable.core.saver_core import where

    conf = {"thread_id": 7, "checkpoint_ns": "sub:1", "checkpoint_id": "c"}
    assert where({"configurable": conf}) == ("7", "sub:1", "c")


def test_db_system_stands_beside_db_system_name_where_the_opt_in_asks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for opt_in, both in (("", False), ("database", False), ("http, database/dup", True)):
        monkeypatch.setenv("OTEL_SEMCONV_STABILITY_OPT_IN", opt_in)
        rec = Recorded()
        rec.telemetry.begin("get_tuple", "t", "", None).end()
        (span,) = rec.spans.get_finished_spans()
        assert span.attributes["db.system.name"] == "redis"
        assert span.attributes.get("db.system") == ("redis" if both else None), opt_in


def test_a_read_writes_no_bytes_and_a_batch_counts_its_scripts() -> None:
    from langgraph_durable.core.ops import Batch
    from langgraph_durable.io.counts import written_bytes

    assert written_bytes(Script("read_checkpoints", ["k"], [b"guessed-field"])) == 0
    batch = Batch([Script("put_writes", ["k"], [b"x" * 10]), ("HSET", "k", "f", b"y" * 5)])
    assert written_bytes(batch) == 15
    assert written_bytes(("HGET", "k", b"f")) == 0


_SET_LATER = """
from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from langgraph_durable.io.telemetry import create_telemetry

telemetry = create_telemetry()
assert telemetry.begin("put", "t") is None  # no SDK yet: nothing made
trace.set_tracer_provider(TracerProvider())
reader = InMemoryMetricReader()
metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))
scope = telemetry.begin("put", "t")
assert scope is not None and scope.recording and scope.instruments is not None
telemetry.finish(scope, None)
print("recorded", reader.get_metrics_data() is not None)
"""


def test_global_providers_set_after_the_saver_was_made_are_used() -> None:
    # A process of its own: OpenTelemetry's global providers can be set once per process.
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", _SET_LATER], check=False, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "recorded True"


def test_a_global_provider_is_asked_again_once_it_is_set() -> None:
    from types import SimpleNamespace

    from langgraph_durable.io.providers import GlobalProvider

    api = SimpleNamespace(_GLOBAL=None)
    asked: list[str] = []

    def getter() -> str:
        asked.append("asked")
        return api._GLOBAL or "proxy"

    found = GlobalProvider(getter, api, "_GLOBAL", "LGD_TEST_NO_SUCH_VARIABLE")
    assert [found(), found(), found()] == ["proxy"] * 3
    assert asked == ["asked"]  # unset: the proxy, without asking each time
    api._GLOBAL = "sdk"
    assert [found(), found()] == ["sdk", "sdk"] and len(asked) == 3
    gone = GlobalProvider(getter, SimpleNamespace(), "_GLOBAL", "LGD_TEST_NO_SUCH_VARIABLE")
    assert gone() == "sdk" and len(asked) == 4  # no such global: the getter answers


def test_a_provider_named_by_the_environment_is_always_asked_for(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from types import SimpleNamespace

    from langgraph_durable.io.providers import GlobalProvider

    monkeypatch.setenv("LGD_TEST_PROVIDER", "some.entry.point")
    asked: list[str] = []
    found = GlobalProvider(
        lambda: asked.append("asked") or "loaded",
        SimpleNamespace(_GLOBAL=None),
        "_GLOBAL",
        "LGD_TEST_PROVIDER",
    )
    assert [found(), found()] == ["loaded", "loaded"] and len(asked) == 2
