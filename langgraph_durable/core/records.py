"""Decoded records and the small rules shared by every plan module.

Owns: the result of decoding one checkpoint entry (``DecodedCheckpoint``, or ``DamagedCheckpoint`` naming
the key, the reason and what to quarantine), the damage reasons the plans branch on
(``Damage``, and which of them may be this reader's configuration, never
quarantined), the shape check a verified
checkpoint must pass before anything trusts it, and reply helpers (a damaged key of the
wrong type reads as empty). No I/O, no plans.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

import msgpack
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import CheckpointMetadata

from langgraph_durable.core import reply_codes
from langgraph_durable.core.errors import RecordDamagedError
from langgraph_durable.core.keys import KeySchema

EMPTY = "empty"  # serde type of a channel that has a version but no value
LIST_PAGE = 32  # checkpoints fetched per round trip by list()
PLAN_RETRIES = 5  # guarded deletions re-planned when a writer raced them


class Damage(str, Enum):
    """Why a record could not be used: the kinds the plans branch on.

    A reason is text (reports, logs and quarantine entries carry it, with details after
    the kind, as in "refused type x.Y (not in the msgpack allowlist)"); ``Damage.of``
    reads its kind back, so no plan compares reason strings itself."""

    MISSING = "missing"
    TRUNCATED = "truncated"
    NOT_A_RECORD = "not a langgraph-durable record"
    UNKNOWN_FORMAT = "unknown format version"
    UNKNOWN_ALGORITHM = "unknown algorithm"
    BAD_SIGNATURE = "bad signature"
    CHECKSUM_MISMATCH = "checksum mismatch"
    UNDECODABLE = "undecodable body"
    MALFORMED_CHECKPOINT = "malformed checkpoint"
    REFUSED = "refused"
    UNDESERIALIZABLE = "undeserializable"
    UNDECOMPRESSABLE = "undecompressable"  # verified, yet not the compressed value it names
    MALFORMED_MEMBER = "malformed index member"
    NOT_INDEXED = "record not in the index"  # its index key was evicted or lost: reindex.lua
    MISSING_RECORD = "missing record"  # indexed, but the record is gone
    QUARANTINED = "quarantined"
    OTHER = "other"

    __str__ = str.__str__  # the text itself, in logs and f-strings, on every Python
    __format__ = str.__format__

    @classmethod
    def of(cls, reason: str) -> Damage:
        """The kind a reason text starts with (the longest that matches), else OTHER."""
        for kind in _BY_LENGTH:
            if reason.startswith(kind.value):
                return kind
        return cls.OTHER

    @property
    def may_be_configuration(self) -> bool:
        """Damage that may be this reader's configuration, not the record (its keys, its
        format version, its serializer or allowlist): skipped and reported, never
        quarantined."""
        return self in _CONFIGURATION


_BY_LENGTH = sorted(Damage, key=lambda kind: len(kind.value), reverse=True)
_CONFIGURATION = frozenset(
    {
        Damage.BAD_SIGNATURE,
        Damage.UNKNOWN_FORMAT,
        Damage.UNKNOWN_ALGORITHM,
        Damage.REFUSED,
        Damage.UNDESERIALIZABLE,
    }
)
MALFORMED = Damage.MALFORMED_MEMBER
NOT_INDEXED = Damage.NOT_INDEXED
MISSING_RECORD = Damage.MISSING_RECORD


def may_be_configuration(reason: str) -> bool:
    return Damage.of(reason).may_be_configuration


@dataclass
class DamagedCheckpoint:
    member: str
    checkpoint_id: str
    key: str
    reason: str
    quarantine: list[tuple[str, str, str]]  # (hash kind, field, reason)


@dataclass
class DecodedCheckpoint:
    """A checkpoint record that verified, before its channel values are loaded."""

    member: str
    checkpoint_ns: str
    checkpoint_id: str
    parent_id: str | None
    checkpoint: dict[str, Any]
    metadata: CheckpointMetadata
    writes: list[tuple[str | bytes, bytes | None]]  # (write member as stored, record)
    dropped_writes: list[tuple[str, str | bytes, str]] = field(default_factory=list)
    fields: list[str] | None = None  # blob fields of its channel values, in version order


def as_text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value


def member_label(value: str | bytes) -> str:
    """Text for logs and reports, even for bytes that are not UTF-8 (damage)."""
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


def task_of(keys: KeySchema, write_member: str) -> str | None:
    try:
        return keys.parse_write_member(write_member).task_id
    except ValueError:
        return None


def thread_id_of(conf: Mapping[str, Any]) -> str:
    return str(conf["thread_id"])


def checkpoint_config(thread_id: str, checkpoint_ns: str, checkpoint_id: str) -> RunnableConfig:
    return {
        "configurable": {
            "thread_id": thread_id,
            "checkpoint_ns": checkpoint_ns,
            "checkpoint_id": checkpoint_id,
        }
    }


def wrong_type_as_empty(
    replies: Sequence[Any], empty: Sequence[Any]
) -> tuple[list[Any], list[int]]:
    """Batch replies with each WRONGTYPE error (a damaged key) replaced by the empty value
    at its place, and the places that had one; any other error is raised."""
    values, wrong = [], []
    for i, (reply, nothing) in enumerate(zip(replies, empty)):
        if isinstance(reply, Exception):
            if not reply_codes.is_wrong_type(reply):
                raise reply
            reply = nothing
            wrong.append(i)
        values.append(reply)
    return values, wrong


def check_shape(checkpoint: Any, metadata: Any, checkpoint_id: str, parent_id: Any) -> None:
    """A verified checkpoint record is still only bytes someone wrote: everything a read
    relies on must have the shape LangGraph gives it, or it is damage, not a crash."""
    versions = checkpoint.get("channel_versions") if isinstance(checkpoint, dict) else None
    if (
        not isinstance(metadata, dict)
        or not isinstance(versions, dict)
        or checkpoint.get("id") != checkpoint_id
        or not isinstance(checkpoint.get("ts", ""), str)
        or not isinstance(checkpoint.get("versions_seen", {}), dict)
        or not (parent_id is None or isinstance(parent_id, str))
        or not all(
            isinstance(c, str) and isinstance(v, (str, int, float)) and not isinstance(v, bool)
            for c, v in versions.items()
        )
    ):
        raise RecordDamagedError("malformed checkpoint")


def quarantine_reason(entry: bytes) -> str:
    try:
        reason = msgpack.unpackb(entry, raw=True)[0]
    except (ValueError, TypeError, IndexError, KeyError, msgpack.UnpackException):
        return "unreadable quarantine entry"
    return reason.decode(errors="replace") if isinstance(reason, bytes) else str(reason)


class _NoValue:
    def __repr__(self) -> str:
        return "<no value>"


NO_VALUE: Any = _NoValue()
