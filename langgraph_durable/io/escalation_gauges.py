"""The escalation gauges: how many calls wait for a human, and for how long.

Owns ``lgd.escalations.waiting`` and ``lgd.escalations.oldest_age`` (OpenTelemetry
observable gauges; ``ToolLedger.observe_escalations`` registers them). A collection
reads the waiting calls once for both gauges; a read that fails is logged and observes
nothing, never failing the application's metrics.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from typing import Any

from langgraph_durable.io.instruments import INSTRUMENTATION
from langgraph_durable.io.telemetry import version

logger = logging.getLogger("langgraph_durable")


def observe_escalations(waiting: Callable[[], list[Any]], meter_provider: Any = None) -> bool:
    """Gauges ``lgd.escalations.waiting`` and ``lgd.escalations.oldest_age`` (seconds),
    read by calling ``waiting()`` (escalations with an ``age_seconds``) at each metrics
    collection, once for both. False when ``opentelemetry-api`` is not installed."""
    try:
        from opentelemetry import metrics
        from opentelemetry.metrics import Observation
    except ImportError:
        return False
    last: dict[str, Any] = {"at": -1.0, "found": []}

    def read(fresh: bool) -> list[Any] | None:
        # A collection calls ``count`` first: it reads; ``oldest`` reuses that read
        now = time.monotonic()
        if fresh or now - last["at"] > 1.0:
            try:
                last["found"] = waiting()
            except Exception as exc:  # noqa: BLE001 - a collection must not fail the app
                logger.warning("langgraph-durable: counting escalations failed: %s", exc)
                last["found"] = None
            last["at"] = now
        return last["found"]  # type: ignore[no-any-return]

    def count(_: Any) -> Iterator[Any]:
        found = read(fresh=True)
        if found is not None:
            yield Observation(len(found))

    def oldest(_: Any) -> Iterator[Any]:
        found = read(fresh=False)
        if found is not None:
            ages = [e.age_seconds for e in found if e.age_seconds is not None]
            yield Observation(max(ages, default=0.0))

    meter = metrics.get_meter(INSTRUMENTATION, version(), meter_provider=meter_provider)
    meter.create_observable_gauge(
        "lgd.escalations.waiting",
        callbacks=[count],
        unit="{escalation}",
        description="calls waiting for a human's answer, every thread of the key prefix",
    )
    meter.create_observable_gauge(
        "lgd.escalations.oldest_age",
        callbacks=[oldest],
        unit="s",
        description="how long the oldest waiting call has waited",
    )
    return True
