"""What the saver shows OpenTelemetry: a span per operation, events, and metrics.

Owns the one bridge to ``opentelemetry-api`` (the ``otel`` extra). ``create_telemetry``
gives ``NO_TELEMETRY`` when the API is not installed; with it, spans and instruments come
from the providers passed or the global ones (no SDK configured: OTel's no-op ones).
The driver (``driver.py``) opens one ``Scope`` per traced plan (``core/ops.py``'s
``Operation``), counts its round trips, records read and bytes sent into it, turns each
``Note`` the plan yields into a span event and a count, and ends it with the
operation's duration in ``db.client.operation.duration``. Code outside a plan (the
ledger's replays and escalations, a lease lost while renewing it) calls ``event``: the
event goes on a short span of its own, under the caller's current span. Rules:
  * A span is never made the current one: plans run inside generators, and a context
    attached in one must not leak to the code between its steps. The caller's current
    span (LangGraph's, the application's) is its parent, sync or async.
  * Thread ids are recorded as given, hashed (``sha256:`` and 16 hex digits) or not at
    all (``trace_thread_ids``); nothing of a checkpoint's content is ever recorded.
  * Without a recording span, no attribute is computed (``Scope.recording``).
The names, units and attributes are documented in docs/operations/observability.md; the
escalation gauges are in ``escalation_gauges.py``.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from langgraph_durable.core.errors import ConfigurationError, LeaseHeldError, LeaseLostError
from langgraph_durable.io import providers
from langgraph_durable.io.counts import records_in, written_bytes
from langgraph_durable.io.instruments import INSTRUMENTATION, Instruments

logger = logging.getLogger("langgraph_durable")
ThreadIds = Literal["plain", "hashed", "omit"]
THREAD_ID_CHOICES = ("plain", "hashed", "omit")


class OperationCancelled(Exception):
    """Recorded as the error of an operation stopped with a round trip in flight (its
    task cancelled, the process interrupted): not a success."""


@dataclass
class Scope:
    """One saver operation in progress: its span (or None) and what it counted."""

    telemetry: Telemetry
    name: str
    started: float
    span: Any = None
    recording: bool = False
    instruments: Any = None  # the meter provider's instruments, None without metrics
    round_trips: int = 0
    records_read: int = 0
    bytes_written: int = 0
    ended: bool = False

    def sending(self, op: Any) -> None:
        """An operation of the plan is sent: the bytes it writes are counted (once,
        however many times a lost connection sends it): a write script's arguments,
        also inside a batch, and a writing command's; never a read's."""
        if self.recording or self.instruments is not None:
            self.bytes_written += written_bytes(op)

    def sent(self) -> None:
        """One round trip."""
        self.round_trips += 1

    def received(self, reply: Any) -> None:
        if self.recording:
            self.records_read += records_in(reply)

    def note(self, event: str, attributes: Mapping[str, Any]) -> None:
        """Something an operator must notice: a span event and a count."""
        try:
            if self.recording:
                self.span.add_event(event, _bounded(attributes))
            if self.instruments is not None:
                self.telemetry.count(event, attributes)
        except Exception as exc:  # noqa: BLE001 - telemetry never fails the saver
            _failed(exc)

    def end(self, error: BaseException | None = None) -> None:
        """End the operation, once (a second call does nothing)."""
        if self.ended:
            return
        self.ended = True
        try:
            self.telemetry.finish(self, error)
        except Exception as exc:  # noqa: BLE001 - as above
            _failed(exc)


_warned: list[bool] = []


def _failed(exc: Exception) -> None:
    """Telemetry that raised (an exporter or processor of the application's): logged once
    per process, never raised into the saver."""
    if not _warned:
        _warned.append(True)
        logger.warning("langgraph-durable: OpenTelemetry recording failed: %r", exc)


MAX_ATTRIBUTE_CHARS = 1000  # stored bytes name what they like: events carry at most this


def _bounded(attributes: Mapping[str, Any]) -> dict[str, Any]:
    return {
        k: (v[:MAX_ATTRIBUTE_CHARS] if isinstance(v, str) else v)
        for k, v in attributes.items()
        if v is not None
    }


class Telemetry:
    """The no-op telemetry; ``OtelTelemetry`` records. Both keep this interface."""

    def begin(
        self,
        name: str,
        thread_id: str | None = None,
        checkpoint_ns: str | None = None,
        checkpoint_id: str | None = None,
    ) -> Scope | None:
        return None

    def finish(self, scope: Scope, error: BaseException | None) -> None:
        """End ``scope``: its span, its duration, its counts."""

    def use_server(self, attributes: Mapping[str, Any]) -> None:
        """Where the saver's client connects (``server_attributes``), for every span."""

    def count(self, event: str, attributes: Mapping[str, Any]) -> None:
        """Count one ``event`` (``lgd.count`` in its attributes: that many)."""

    def event(self, event: str, attributes: Mapping[str, Any], thread_id: str | None) -> None:
        """Record ``event`` outside any plan: on a short span of its own, and counted."""


NO_TELEMETRY = Telemetry()
_ABSENT = object()  # no provider at all: what ``OtelTelemetry._quiet`` starts as


class OtelTelemetry(Telemetry):
    """Spans, span events and metrics through ``opentelemetry-api``.

    Each operation looks up the providers (the ones given, else the global ones, which an
    application may set after the saver was made): while both are OpenTelemetry's no-op
    or proxy providers (no SDK), ``begin`` returns None and nothing is computed."""

    def __init__(
        self,
        tracer_provider: Any,
        meter_provider: Any,
        thread_ids: ThreadIds,
        server: Mapping[str, Any],
    ) -> None:
        from opentelemetry.trace import SpanKind, Status, StatusCode

        self._kind, self._status, self._error = SpanKind.CLIENT, Status, StatusCode.ERROR
        self._version = version()
        self._given = (tracer_provider, meter_provider)
        self._global_tracers, self._global_meters = (
            providers.tracer_provider(),
            providers.meter_provider(),
        )
        self._tracer_of: tuple[Any, Any] = (None, None)  # (provider, its tracer)
        self._instruments_of: tuple[Any, Instruments | None] = (None, None)
        # the (tracer, meter) providers last found both no-op: while in use, nothing to do
        self._quiet: tuple[Any, Any] = (_ABSENT, _ABSENT)
        self._thread_ids = thread_ids
        self._server = {**_system(), **server}

    def use_server(self, attributes: Mapping[str, Any]) -> None:
        self._server = {**_system(), **attributes}

    def tracer(self) -> Any:
        """The tracer of the provider in use, or None while it is a no-op one."""
        provider = self._given[0] or self._global_tracers()
        if _no_op(provider):
            return None
        if self._tracer_of[0] is not provider:
            self._tracer_of = (provider, provider.get_tracer(INSTRUMENTATION, self._version))
        return self._tracer_of[1]

    def instruments(self) -> Instruments | None:
        """The instruments of the meter provider in use, or None while it is a no-op one."""
        provider = self._given[1] or self._global_meters()
        if _no_op(provider):
            return None
        if self._instruments_of[0] is not provider:
            meter = provider.get_meter(INSTRUMENTATION, self._version)
            self._instruments_of = (provider, Instruments(meter))
        return self._instruments_of[1]

    def begin(
        self,
        name: str,
        thread_id: str | None = None,
        checkpoint_ns: str | None = None,
        checkpoint_id: str | None = None,
        place: Callable[[], tuple[str | None, str | None, str | None]] | None = None,
    ) -> Scope | None:
        """The scope of operation ``name`` (None with no tracer and no meter); ``place``,
        if given, says where instead of the three ids, asked only by a recording span."""
        try:
            return self._begin(name, thread_id, checkpoint_ns, checkpoint_id, place)
        except Exception as exc:  # noqa: BLE001 - telemetry never fails the saver
            _failed(exc)
            return None

    def _begin(
        self,
        name: str,
        thread_id: str | None,
        checkpoint_ns: str | None,
        checkpoint_id: str | None,
        place: Callable[[], tuple[str | None, str | None, str | None]] | None = None,
    ) -> Scope | None:
        providers_ = (
            self._given[0] or self._global_tracers(),
            self._given[1] or self._global_meters(),
        )
        if providers_ == self._quiet:  # the no-op ones the last operation met: nothing to do
            return None
        tracer, instruments = self.tracer(), self.instruments()
        if tracer is None and instruments is None:
            self._quiet = providers_
            return None
        span = tracer.start_span(name, kind=self._kind) if tracer is not None else None
        recording = span is not None and span.is_recording()
        scope = Scope(self, name, time.perf_counter(), span, recording, instruments)
        if recording:
            if place is not None:
                thread_id, checkpoint_ns, checkpoint_id = place()
            where = {**self._server, "db.operation.name": name}
            if thread_id is not None and self._thread_ids != "omit":
                where["langgraph.thread_id"] = self._thread(thread_id)
            if checkpoint_ns is not None:
                where["langgraph.checkpoint_ns"] = checkpoint_ns
            if checkpoint_id is not None:
                where["langgraph.checkpoint_id"] = checkpoint_id
            span.set_attributes(_bounded(where))
        return scope

    def finish(self, scope: Scope, error: BaseException | None) -> None:
        elapsed = time.perf_counter() - scope.started
        if error is not None:
            self._note_failure(scope, error)
        measured = scope.instruments
        if measured is not None:
            common = {**self._server, "db.operation.name": scope.name}
            if error is not None:
                common["error.type"] = type(error).__qualname__
            measured.duration.record(elapsed, common)
            if scope.bytes_written:
                measured.bytes.add(scope.bytes_written, {"db.operation.name": scope.name})
            if error is None and scope.name == "put":
                measured.checkpoints.add(1)
        if scope.recording:
            scope.span.set_attributes(
                {
                    "lgd.round_trips": scope.round_trips,
                    "lgd.records_read": scope.records_read,
                    "lgd.bytes_written": scope.bytes_written,
                }
            )
            if error is not None:
                kind = type(error).__qualname__
                scope.span.set_attribute("error.type", kind)
                if self._thread_ids == "plain":
                    scope.span.record_exception(error)
                else:  # messages name threads: only the type, as the option asks
                    scope.span.add_event("exception", {"exception.type": kind})
                scope.span.set_status(self._status(self._error, kind))
        if scope.span is not None:
            scope.span.end()

    def _note_failure(self, scope: Scope, error: BaseException) -> None:
        # a refused acquisition is counted once, by the lease when it gives up (lease.py)
        if isinstance(error, LeaseHeldError) and scope.name != "acquire_lease":
            scope.note("lgd.lease.refused", {"lgd.lease.holder": str(error.holder or "")})
        elif isinstance(error, LeaseLostError):
            scope.note("lgd.lease.lost", {"lgd.lease.token": str(error.token)})

    def count(self, event: str, attributes: Mapping[str, Any]) -> None:
        try:
            instruments = self.instruments()
            counter = instruments.counters.get(event) if instruments is not None else None
            if counter is not None:
                amount = attributes.get("lgd.count", 1)
                amount = amount if isinstance(amount, int) and amount > 0 else 1
                counter.add(amount, _kind(event, attributes))
        except Exception as exc:  # noqa: BLE001 - telemetry never fails the saver
            _failed(exc)

    def event(self, event: str, attributes: Mapping[str, Any], thread_id: str | None) -> None:
        scope = self.begin(event, thread_id)
        if scope is not None:
            scope.note(event, attributes)
            try:
                if scope.span is not None:
                    scope.span.end()
            except Exception as exc:  # noqa: BLE001 - as above
                _failed(exc)

    def _thread(self, thread_id: str) -> str:
        if self._thread_ids == "hashed":
            raw = thread_id.encode("utf-8", "surrogatepass")  # whatever the plan says of it
            return "sha256:" + hashlib.sha256(raw).hexdigest()[:16]
        return thread_id


def version() -> str:
    """The instrumentation's version: the installed distribution's."""
    try:
        return importlib.metadata.version("langgraph-durable")
    except importlib.metadata.PackageNotFoundError:  # run from a source tree
        return "0+unknown"


def _no_op(provider: Any) -> bool:
    """Whether ``provider`` is OpenTelemetry's no-op or not-yet-configured proxy one."""
    return type(provider).__name__ in _NO_OP_PROVIDERS


_NO_OP_PROVIDERS = frozenset(
    {"ProxyTracerProvider", "NoOpTracerProvider", "_ProxyMeterProvider", "NoOpMeterProvider"}
)


def _kind(event: str, attributes: Mapping[str, Any]) -> dict[str, str]:
    """The attribute telling apart what one counter counts: a lease refused or lost, a
    tool call or a model call replayed."""
    if event.startswith("lgd.lease."):
        return {"lgd.lease.outcome": event.rsplit(".", 1)[1]}
    if event == "lgd.replay" and isinstance(kind := attributes.get("lgd.call.kind"), str):
        return {"lgd.call.kind": kind}
    return {}


def create_telemetry(
    tracer_provider: Any = None,
    meter_provider: Any = None,
    *,
    trace_thread_ids: str = "plain",
    server: Mapping[str, Any] | None = None,
    importer: Callable[[str], Any] | None = None,
) -> Telemetry:
    """``OtelTelemetry`` if ``opentelemetry-api`` is installed, else ``NO_TELEMETRY``."""
    if trace_thread_ids not in THREAD_ID_CHOICES:
        raise ConfigurationError(
            f"trace_thread_ids must be one of {', '.join(THREAD_ID_CHOICES)}, "
            f"got {trace_thread_ids!r}"
        )
    try:
        (importer or __import__)("opentelemetry.trace")
    except ImportError:
        return NO_TELEMETRY
    return OtelTelemetry(tracer_provider, meter_provider, trace_thread_ids, server or {})  # type: ignore[arg-type]


def server_attributes(where: Any) -> dict[str, Any]:
    """OTel's ``server.*`` and ``db.namespace`` of a redis-py client (or of its pool's
    connection kwargs): a cluster client names its default node; a Sentinel client its
    service, not a host, so neither is said."""
    if isinstance(where, Mapping):
        kwargs: Mapping[str, Any] = where
    elif (pool := getattr(where, "connection_pool", None)) is not None:
        kwargs = getattr(pool, "connection_kwargs", None) or {}
    elif (node := getattr(getattr(where, "nodes_manager", None), "default_node", None)) is not None:
        kwargs = {"host": node.host, "port": node.port}
    else:
        kwargs = {}
    found: dict[str, Any] = {}
    if host := kwargs.get("host"):
        found["server.address"] = str(host)
    if port := kwargs.get("port"):
        found["server.port"] = int(port)
    if (db := kwargs.get("db")) is not None:
        found["db.namespace"] = str(db)
    return found


def _system() -> dict[str, str]:
    """The database system attribute: ``db.system.name`` (the stable conventions), and
    ``db.system`` beside it where ``OTEL_SEMCONV_STABILITY_OPT_IN`` asks for both
    (``database/dup``), as OpenTelemetry's own instrumentations do for backends that
    still read the older name."""
    import os

    opted = {o.strip() for o in os.environ.get("OTEL_SEMCONV_STABILITY_OPT_IN", "").split(",")}
    return {
        "db.system.name": "redis",
        **({"db.system": "redis"} if "database/dup" in opted else {}),
    }
