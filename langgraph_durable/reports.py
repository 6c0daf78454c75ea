"""What reads, listings and ``verify`` report back to users: the public report types.

Owns ``RecoveryReport`` (what a read skipped to find a checkpoint that verifies),
``SkippedCheckpoint``, ``Finding`` and ``VerifyReport``. Plain data: filled in by the
plans of ``core.py`` and ``verify.py``, exported from ``langgraph_durable``.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class SkippedCheckpoint:
    checkpoint_id: str
    key: str
    reason: str


@dataclass
class RecoveryReport:
    """What a read had to skip to find a checkpoint that verifies completely."""

    thread_id: str
    checkpoint_ns: str
    skipped: list[SkippedCheckpoint] = field(default_factory=list)
    dropped_writes: list[SkippedCheckpoint] = field(default_factory=list)
    used_checkpoint_id: str | None = None
    recovered_from_step: int | None = None

    @property
    def fell_back(self) -> bool:
        return bool(self.skipped)


@dataclass(frozen=True)
class Finding:
    """One damaged or inconsistent record found by ``verify``."""

    kind: str  # "checkpoint", "write", "channel value", "index"
    key: str
    field: str
    reason: str
    checkpoint_id: str | None = None


@dataclass
class VerifyReport:
    """What ``saver.verify(thread_id)`` found: intact checkpoints, every finding, and how
    many records earlier reads or repairs moved to the thread's quarantine."""

    thread_id: str
    intact_checkpoints: list[str] = field(default_factory=list)
    damaged_checkpoints: list[str] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    records_checked: int = 0
    quarantined: int = 0

    @property
    def ok(self) -> bool:
        """Nothing damaged now, and nothing ever quarantined: quarantined records were
        damage too, and what they held is gone from the thread."""
        return not self.findings and not self.quarantined
