"""The saver's OpenTelemetry instruments: their names, units and descriptions.

Owns what ``telemetry.py`` records into: the duration histogram (OTel's
``db.client.operation.duration``, its recommended buckets), the counters of checkpoints
and bytes written, and one counter per kind of event an operator must notice
(``COUNTERS``). docs/operations/observability.md lists them; a unit test holds the two
to each other.
"""

from __future__ import annotations

from typing import Any

INSTRUMENTATION = "langgraph_durable"

# OTel's recommended boundaries for db.client.operation.duration (seconds)
DURATION_BUCKETS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0)
INSTRUMENTATION = "langgraph_durable"

# event name -> (counter, its unit, its description); every Note and event is counted
COUNTERS: dict[str, tuple[str, str, str]] = {
    "lgd.fallback": (
        "lgd.fallbacks",
        "{fallback}",
        "reads that fell back past a damaged newest checkpoint",
    ),
    "lgd.record.damaged": ("lgd.records.damaged", "{record}", "damaged records found"),
    "lgd.quarantine": ("lgd.records.quarantined", "{record}", "records moved to quarantine"),
    "lgd.replay": (
        "lgd.ledger.replays",
        "{call}",
        "tool and model calls answered from the ledger instead of running again",
    ),
    "lgd.escalation.raised": (
        "lgd.escalations.raised",
        "{escalation}",
        "calls whose outcome is unknown, put to a human",
    ),
    "lgd.escalation.resolved": (
        "lgd.escalations.resolved",
        "{escalation}",
        "escalations answered",
    ),
    "lgd.lease.refused": ("lgd.lease.conflicts", "{conflict}", "leases refused or lost"),
    "lgd.lease.lost": ("lgd.lease.conflicts", "{conflict}", "leases refused or lost"),
}


class Instruments:
    """The saver's instruments, made from one meter provider."""

    def __init__(self, meter: Any) -> None:
        self.duration = meter.create_histogram(
            "db.client.operation.duration",
            unit="s",
            description="Duration of saver operations (each one or more Redis round trips)",
            explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
        )
        self.checkpoints = meter.create_counter(
            "lgd.checkpoints.written", unit="{checkpoint}", description="checkpoints written"
        )
        self.bytes = meter.create_counter(
            "lgd.bytes.written", unit="By", description="bytes of records sent to Redis"
        )
        self.counters = {
            event: meter.create_counter(name, unit=unit, description=text)
            for event, (name, unit, text) in COUNTERS.items()
        }
