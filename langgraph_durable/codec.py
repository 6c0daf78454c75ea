"""The record codec: the settings every plan reads, and how records are sealed and opened.

Owns turning values into stored records and back: ``_seal`` packs a body with msgpack and
seals it in the integrity envelope (``envelope.py``) under the record's identity (kind,
thread, field), a value compressed first where it pays (``compression.py``); ``_open``
verifies before it unpacks; ``load_value`` decompresses and deserializes only verified
bytes, through the allowlist (``serde.py``); ``_decode_entry`` turns one entry of
the read script into a ``_Decoded`` checkpoint or a ``_Damage`` (``records.py``). Rules:
  * Nothing stored is trusted: every record is verified, then shape-checked, before any
    of it is used; whatever fails is ``RecordDamagedError``, never a crash.
  * A record Redis would refuse as too large is refused here, typed, before it is sent.
``RecordCodec`` is the base of every plan mixin of ``SaverCore``: it declares the
settings they share (set once by ``SaverCore.__init__``, never changed by a plan).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import msgpack
from langgraph.checkpoint.base import SerializerProtocol

from langgraph_durable import inputs
from langgraph_durable.compression import Compression
from langgraph_durable.envelope import Envelope
from langgraph_durable.errors import RecordDamagedError
from langgraph_durable.keys import SEP, KeySchema, ThreadKeys
from langgraph_durable.records import (
    _NO_VALUE,
    EMPTY,
    MALFORMED,
    MISSING_RECORD,
    Damage,
    _check_shape,
    _Damage,
    _Decoded,
    _label,
    _text,
)
from langgraph_durable.serde import accepted_types, load

if TYPE_CHECKING:
    from langgraph_durable.reports import RecoveryReport


class RecordCodec:
    """Sealing and opening records; the settings the plan mixins share."""

    serde: SerializerProtocol
    keys: KeySchema
    envelope: Envelope
    ttl: int | None
    keep_last: int | None
    wait_for_replicas: int
    replica_timeout_ms: int
    repair_on_read: bool  # False: reads skip damage without moving it (they write nothing)
    refresh_on_read: bool  # True: a read gives the thread's keys their full ttl again
    max_record_bytes: int
    compression: Compression
    recovery_reports: dict[tuple[str, str], RecoveryReport]

    @property
    def ttl_arg(self) -> int:
        """The ttl as the write scripts take it: seconds, 0 for none."""
        return int(self.ttl) if self.ttl else 0

    def _seal(
        self, kind: str, thread_id: str, field_: str, body: list[Any], what: str = ""
    ) -> bytes:
        """The record of ``body``; with ``what`` (naming it) a record Redis would refuse
        as too large raises ValueTooLargeError instead."""
        record = self.envelope.seal(
            KeySchema.identity(kind, thread_id, field_), msgpack.packb(body, use_bin_type=True)
        )
        if what:
            inputs.record_size(
                len(record), thread_id=thread_id, what=what, limit=self.max_record_bytes
            )
        return record

    def _seal_value(
        self, kind: str, thread_id: str, field_: str, head: list[Any], value: Any, what: str
    ) -> bytes:
        """The record of a serialized value; one that is too large on its own is refused
        before it is copied into a record."""
        type_, data = self.serde.dumps_typed(value) if value is not _NO_VALUE else (EMPTY, b"")
        type_, data = self.compression.pack(type_, data)
        inputs.record_size(len(data), thread_id=thread_id, what=what, limit=self.max_record_bytes)
        return self._seal(kind, thread_id, field_, [*head, type_, data], what)

    def _open(self, kind: str, thread_id: str, field_: str, record: bytes | None) -> list[Any]:
        body = self.envelope.open(KeySchema.identity(kind, thread_id, field_), record)
        try:
            decoded = msgpack.unpackb(body, raw=False)
        except (ValueError, msgpack.UnpackException) as exc:  # verified, yet not ours
            raise RecordDamagedError("undecodable body") from exc
        if not isinstance(decoded, list):
            raise RecordDamagedError("undecodable body")
        return decoded

    def load_value(self, type_: Any, data: Any) -> Any:
        """A verified record's value, decompressed if it was stored compressed
        (compression.py); a type the allowlist refuses is damage (serde.py)."""
        type_, data = self.compression.unpack(type_, data)
        return load(self.serde, type_, data, accepted_types(self.serde))

    def _open_value(self, kind: str, thread_id: str, field_: str, record: bytes | None) -> Any:
        """Open and deserialize a channel value ("bl": the value, or ``_NO_VALUE``) or a
        pending write ("wr": (channel, value)); ``RecordDamagedError`` if either fails."""
        if kind == "wr":
            channel, type_, data = self._open(kind, thread_id, field_, record)
            return channel, self.load_value(type_, data)
        type_, data = self._open(kind, thread_id, field_, record)
        return _NO_VALUE if type_ == EMPTY else self.load_value(type_, data)

    def _blob_record(self, thread_id: str, blob_field: str, channel: str, value: Any) -> bytes:
        what = f"the value of channel {channel!r}"
        return self._seal_value("bl", thread_id, blob_field, [], value, what)

    def _decode_entry(self, tk: ThreadKeys, entry: list[Any]) -> _Decoded | _Damage:
        """One entry of ``read_checkpoints.lua`` (member, record, flat writes, indexed?)."""
        try:
            member = _text(entry[0])
            ns, checkpoint_id = self.keys.parse_checkpoint_member(member)
        except ValueError:  # not a member this saver wrote: drop it from the index
            label = _label(entry[0])
            return _Damage(
                label,
                label.split(SEP, 1)[-1],  # its place in the index, as the next cursor
                tk.cps,
                MALFORMED,
                [("cp", entry[0], MALFORMED)],
            )
        flat = entry[2] or []
        writes = [(flat[i], flat[i + 1]) for i in range(0, len(flat), 2)]
        try:
            parent_id, ckpt_t, ckpt_b, meta_t, meta_b = self._open(
                "cp", tk.thread_id, member, entry[1]
            )
            checkpoint = self.load_value(ckpt_t, ckpt_b)
            metadata = self.load_value(meta_t, meta_b)
            _check_shape(checkpoint, metadata, checkpoint_id, parent_id)
        except (RecordDamagedError, ValueError) as exc:
            reason = getattr(exc, "reason", "undecodable body")
            why = reason
            if Damage.of(reason) is Damage.MISSING:
                # Indexed without a record (evicted, a bad restore): the member leaves the
                # index, so no later read walks it again. Not indexed: never stored,
                # deleted, or quarantined before (its entry says why).
                why = MISSING_RECORD if len(entry) > 3 and entry[3] else reason
            return _Damage(member, checkpoint_id, tk.cp, reason, [("cp", member, why)])
        return _Decoded(
            member=member,
            checkpoint_ns=ns,
            checkpoint_id=checkpoint_id,
            parent_id=parent_id,
            checkpoint=checkpoint,
            metadata=metadata,  # type: ignore[arg-type]
            writes=writes,
        )

    def _fields_of(self, checkpoint_ns: str, versions: Mapping[str, Any]) -> list[str]:
        """The blob fields of the channel values of a checkpoint with these versions."""
        return [
            self.keys.blob_field(checkpoint_ns, channel, version)
            for channel, version in versions.items()
        ]

    def _blob_fields(self, decoded: _Decoded) -> list[str]:
        return self._fields_of(
            decoded.checkpoint_ns, decoded.checkpoint.get("channel_versions", {})
        )

    def _values_verify(self, tk: ThreadKeys, d: _Decoded, values: Mapping[str, Any]) -> bool:
        """Whether every channel value of ``d`` in ``values`` verifies and deserializes."""
        try:
            for blob_field in self._blob_fields(d):
                self._open_value("bl", tk.thread_id, blob_field, values.get(blob_field))
        except RecordDamagedError:
            return False
        return True
