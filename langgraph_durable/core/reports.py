"""What reads, listings and ``verify`` report back to users: the public report types.

Owns ``RecoveryReport`` (what a read skipped to find a checkpoint that verifies),
``SkippedCheckpoint``, ``Finding``, ``VerifyReport``, and what a migration did
(``ThreadMigration``, ``MigrationReport``). Plain data: filled in by the plans of
``core.py`` and ``verify.py`` and by ``migrate.py``, exported from ``langgraph_durable``.
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


@dataclass
class ThreadMigration:
    """What ``migrate`` did with one thread, and what its verify found."""

    thread_id: str
    checkpoints: int = 0  # in the source, every namespace
    copied: int = 0  # checkpoints this run put into Redis
    already_there: int = 0  # found in Redis (an earlier, interrupted run): not put again
    writes: int = 0  # pending writes this run put
    mismatches: list[str] = field(default_factory=list)  # one line each; empty when equal
    verified: bool = False  # compared with the source after the copy

    @property
    def ok(self) -> bool:
        return not self.mismatches


@dataclass
class MigrationReport:
    """What ``migrate`` did: one ``ThreadMigration`` per thread, in the order copied."""

    threads: list[ThreadMigration] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Every thread copied and, where verified, equal to its source."""
        return all(t.ok for t in self.threads)

    @property
    def mismatches(self) -> list[str]:
        return [f"{t.thread_id}: {m}" for t in self.threads for m in t.mismatches]
