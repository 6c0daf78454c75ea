"""The saver core: pure plans that turn checkpointer calls into Redis operations.

Nothing here does I/O. Every operation is a generator (a *plan*) that yields what it
needs done (``Script``, ``Command``, ``Batch``, ``ScanKeys``) and is sent the reply
back; ``list`` also yields ``Emit(item)`` for each result. The sync and async savers are
thin shells that only drive plans (see ``drive`` in ``saver.py`` and ``aio.py``), so
each operation, its round trips and its fallback logic exist exactly once.

``SaverCore`` holds the record codec, writes, reads with fallback, listing, whole-thread
operations and retention, and lease plans; it is being split by concern. Already apart:
the operation types (``ops.py``), the report types (``reports.py``), decoded records and
damage reasons (``records.py``), ``verify`` (``verify.py``) and DeltaChannel history
(``delta.py``), the last two mixed into ``SaverCore``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import msgpack
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    PendingWrite,
    SerializerProtocol,
    get_serializable_checkpoint_metadata,
)

from langgraph_durable import inputs
from langgraph_durable.delta import DeltaHistoryPlans
from langgraph_durable.envelope import Envelope
from langgraph_durable.errors import (
    CheckpointCorruptedError,
    CheckpointLostError,
    InvalidConfigError,
    LeaseHeldError,
    LeaseLostError,
    NotReplicatedError,
    RecordDamagedError,
    UnreadableThreadError,
)
from langgraph_durable.inputs import configurable
from langgraph_durable.keys import SEP, KeySchema, ThreadKeys
from langgraph_durable.lease import held_token
from langgraph_durable.ops import Batch, Command, Emit, Plan, ScanKeys, Script, WaitReplicas
from langgraph_durable.records import (
    _CONFIG_REASONS,
    _NO_VALUE,
    EMPTY,
    LIST_PAGE,
    MALFORMED,
    MISSING_RECORD,
    NOT_INDEXED,
    PLAN_RETRIES,
    _check_shape,
    _Damage,
    _Decoded,
    _hmget,
    _label,
    _quarantine_reason,
    _task_of,
    _text,
    _thread_id,
    _wrong_type_as_empty,
    checkpoint_config,
)
from langgraph_durable.reports import Finding, RecoveryReport, SkippedCheckpoint, VerifyReport
from langgraph_durable.serde import accepted_types, load
from langgraph_durable.verify import VerifyPlans

if TYPE_CHECKING:
    from langgraph_durable.lease import Lease

# Names other modules and tests import from here; each lives in the module named above.
__all__ = [
    "EMPTY",
    "LIST_PAGE",
    "MALFORMED",
    "MISSING_RECORD",
    "NOT_INDEXED",
    "PLAN_RETRIES",
    "_CONFIG_REASONS",
    "Batch",
    "Command",
    "Emit",
    "Finding",
    "Plan",
    "RecoveryReport",
    "SaverCore",
    "ScanKeys",
    "Script",
    "SkippedCheckpoint",
    "VerifyReport",
    "WaitReplicas",
    "_wrong_type_as_empty",
    "checkpoint_config",
]

logger = logging.getLogger("langgraph_durable")


class SaverCore(VerifyPlans, DeltaHistoryPlans):
    """Plans for every checkpointer operation, shared by ``RedisSaver`` and ``AsyncRedisSaver``."""

    def __init__(
        self,
        *,
        serde: SerializerProtocol,
        keys: KeySchema,
        envelope: Envelope,
        ttl: int | None,
        keep_last: int | None = None,
        wait_for_replicas: int = 0,
        replica_timeout_ms: int = 1000,
        repair_on_read: bool = True,
    ) -> None:
        self.serde = serde
        # False: reads skip damage without moving it to quarantine (inspection writes nothing).
        self.repair_on_read = repair_on_read
        self.wait_for_replicas = wait_for_replicas
        self.replica_timeout_ms = replica_timeout_ms
        self.keep_last = keep_last
        self.keys = keys
        self.envelope = envelope
        self.ttl = ttl
        self.recovery_reports: dict[tuple[str, str], RecoveryReport] = {}
        self._newest_versions = _NewestVersions()
        self.max_record_bytes = inputs.MAX_RECORD_BYTES  # Redis's proto-max-bulk-len

    @property
    def _ttl_arg(self) -> int:
        return int(self.ttl) if self.ttl else 0

    # -- sealing and opening records -------------------------------------------------
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
        """A verified record's value; a type the allowlist refuses is damage (serde.py)."""
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

    # -- put ---------------------------------------------------------------------------
    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> Plan[RunnableConfig]:
        conf = configurable(config)
        thread_id = _thread_id(conf)
        ns = conf.get("checkpoint_ns", "")
        parent_id = conf.get("checkpoint_id")
        inputs.text(checkpoint["id"], "checkpoint['id']")
        for channel in new_versions:
            inputs.text(channel, "a channel name in new_versions")
        tk = self.keys.thread(thread_id)
        stored = dict(checkpoint)
        values: dict[str, Any] = stored.pop("channel_values", {})
        meta = get_serializable_checkpoint_metadata(config, metadata)
        member = self.keys.checkpoint_member(ns, checkpoint["id"])
        record = self._seal(
            "cp",
            thread_id,
            member,
            [parent_id, *self.serde.dumps_typed(stored), *self.serde.dumps_typed(meta)],
            f"checkpoint {checkpoint['id']!r} (with its metadata)",
        )
        upper, lower = self.keys.namespace_range(ns) if self.keep_last else ("", "")
        # With a parent, the script refuses to build on it once it is gone (CheckpointLostError)
        kept = (
            self._fields_of(
                ns,
                {c: v for c, v in checkpoint["channel_versions"].items() if c not in new_versions},
            )
            if parent_id
            else []
        )
        args: list[Any] = [
            self._ttl_arg,
            held_token(self.keys.prefix, thread_id),
            member,
            record,
            str(meta.get("run_id") or ""),
            lower,
            upper,
            self.keys.checkpoint_member(ns, parent_id) if parent_id else "",
            len(kept),
            *kept,
        ]
        blobs = [  # only changed channels are written
            (
                blob_field,
                self._blob_record(thread_id, blob_field, channel, values.get(channel, _NO_VALUE)),
            )
            for channel, version in new_versions.items()
            for blob_field in (self.keys.blob_field(ns, channel, version),)
        ]
        # One round trip: the values by plain HSETNX (a value never changes under its
        # version, and a fenced-out writer's versions have tails of their own, so it can
        # only leave orphans), then the script, which indexes the checkpoint only once
        # they are all there. With a ttl, MULTI keeps a client that dies halfway from
        # leaving a value hash without an expiry.
        script = Script("put_checkpoint", tk.for_writes(), [*args, "sent", *(f for f, _ in blobs)])
        replies = yield Batch(
            [*(("HSETNX", tk.bl, f, r) for f, r in blobs), script],
            errors_as_values=True,
            atomic=bool(self.ttl),
        )
        for reply in replies[:-1]:  # a value refused (out of memory...): say why, typed
            if isinstance(reply, Exception) and "WRONGTYPE" not in str(reply):
                raise reply
        in_namespace = yield from self._write_reply(tk, script, replies[-1])
        if in_namespace == -1:  # the value hash has the wrong type: repair, values inline
            inline = [*args, "inline", *(x for blob in blobs for x in blob)]
            in_namespace = yield Script("put_checkpoint", tk.with_twins(), inline)
        self._newest_versions.remember((thread_id, ns), checkpoint.get("channel_versions", {}))
        yield from self.replicated(tk)
        keep_last = self.keep_last
        if keep_last and in_namespace > keep_last + max(4, keep_last // 4):
            # Amortized retention: one collection per keep_last/4 puts, not one per put.
            yield from self._collect(
                tk, lambda decoded, pinned: _prunable(decoded, keep_last, pinned), pin_valid=True
            )
        return checkpoint_config(thread_id, ns, checkpoint["id"])

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> Plan[None]:
        conf = configurable(config)
        thread_id = _thread_id(conf)
        ns = conf.get("checkpoint_ns", "")
        checkpoint_id = conf.get("checkpoint_id")
        if not checkpoint_id:
            raise InvalidConfigError("put_writes needs config['configurable']['checkpoint_id']")
        inputs.text(task_id, "task_id")
        inputs.text(task_path, "task_path")
        tk = self.keys.thread(thread_id)
        args: list[Any] = [self._ttl_arg, held_token(self.keys.prefix, thread_id)]
        for idx, (channel, value) in enumerate(writes):
            inputs.text(channel, f"the channel of pending write {idx} of task {task_id!r}")
            special = channel in WRITES_IDX_MAP
            member = self.keys.write_member(
                ns, checkpoint_id, task_path, task_id, WRITES_IDX_MAP[channel] if special else idx
            )
            what = f"the pending write to channel {channel!r} of task {task_id!r}"
            args += [
                member,
                self._seal_value("wr", thread_id, member, [channel], value, what),
                "1" if special else "0",
            ]
        if len(args) > 2:
            script = Script("put_writes", tk.for_writes(), args)
            (reply,) = yield Batch([script], errors_as_values=True)
            yield from self._write_reply(tk, script, reply)
            yield from self.replicated(tk)

    def _write_reply(self, tk: ThreadKeys, script: Script, reply: Any) -> Plan[Any]:
        """A write script's reply. One that found a key of the wrong type (LGD_REPAIR) is
        sent again with the damaged twins to move it to; other errors are raised, typed."""
        if isinstance(reply, Exception) and str(reply).startswith("LGD_REPAIR"):
            return (yield Script(script.name, tk.with_twins(), script.args))
        if isinstance(reply, Exception):
            raise self.script_error(script, reply)
        return reply

    def replicated(self, tk: ThreadKeys) -> Plan[None]:
        """With ``wait_for_replicas``: the write just made reached that many replicas."""
        if not self.wait_for_replicas:
            return
        acked = yield WaitReplicas(tk.cps, self.wait_for_replicas, self.replica_timeout_ms)
        if int(acked) < self.wait_for_replicas:
            raise NotReplicatedError(
                thread_id=tk.thread_id,
                wanted=self.wait_for_replicas,
                acknowledged=int(acked),
                timeout_ms=self.replica_timeout_ms,
            )

    # -- leases (lease.py drives these) ---------------------------------------------------
    def _lease_script(self, lease: Lease, op: str, token: str = "") -> Script:
        args = [op, lease.owner, max(1, round(lease.ttl * 1000)), token, self._ttl_arg]
        return Script("lease", self.keys.thread(lease.thread_id).for_writes(), args)

    def acquire_lease(self, lease: Lease) -> Plan[str]:
        """The new fencing token, or LeaseHeldError naming the worker that holds it."""
        reply = yield self._lease_script(lease, "acquire")
        if int(reply[0]) == 1:
            return _text(reply[1])
        raise LeaseHeldError(
            thread_id=lease.thread_id,
            holder=_text(reply[1]),
            expires_in=max(int(reply[2]), 0) / 1000,
        )

    def renew_lease(self, lease: Lease) -> Plan[bool]:
        return bool((yield self._lease_script(lease, "renew", lease.token)))

    def release_lease(self, lease: Lease) -> Plan[bool]:
        return bool((yield self._lease_script(lease, "release", lease.token)))

    def batch_error(self, op: Batch, replies: Sequence[Any]) -> Exception | None:
        """The first error among a batch's replies, typed as ``script_error`` does."""
        for command, reply in zip(op.commands, replies):
            if isinstance(reply, Exception):
                return self.script_error(command, reply) if isinstance(command, Script) else reply
        return None

    def script_error(self, op: Script, exc: Exception) -> Exception:
        """The typed error for a write a script refused (the lease checks), else ``exc``."""
        code, _, detail = str(exc).partition(" ")
        thread_id = self.keys.thread_id_from_key(op.keys[0]) if op.keys else None
        if code == "LGD_LEASED":
            holder, _, ms_left = detail.rpartition(" ")
            return LeaseHeldError(
                thread_id=thread_id or "?", holder=holder, expires_in=max(int(ms_left), 0) / 1000
            )
        if code == "LGD_FENCED":
            token, _, newest = detail.partition(" ")
            return LeaseLostError(
                thread_id=thread_id or "?", token=token, newest=None if newest == "none" else newest
            )
        if code == "LGD_LOST":  # put_checkpoint: ARGV[8] is the parent's member
            ns, parent_id = self.keys.parse_checkpoint_member(op.args[7])
            missing = "the checkpoint is not in the index"
            if detail.startswith("value "):
                _, channel, version = self.keys.parse_blob_field(op.args[int(detail[6:]) - 1])
                missing = f"the value of channel {channel!r}@{version} it passes on is missing"
            return CheckpointLostError(
                thread_id=thread_id or "?",
                checkpoint_ns=ns,
                parent_checkpoint_id=parent_id,
                missing=missing,
            )
        return exc

    # -- reading -----------------------------------------------------------------------
    def _decode_entry(self, tk: ThreadKeys, entry: list[Any]) -> _Decoded | _Damage:
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
            if reason == "missing":
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

    def _complete(
        self,
        tk: ThreadKeys,
        decoded: _Decoded,
        blobs: Mapping[str, bytes | None],
        report: RecoveryReport | None,
    ) -> CheckpointTuple | _Damage:
        """Verify the channel values and pending writes of one checkpoint and build its tuple."""
        values: dict[str, Any] = {}
        versions = decoded.checkpoint.get("channel_versions", {})
        for channel, version in versions.items():
            blob_field = self.keys.blob_field(decoded.checkpoint_ns, channel, version)
            try:
                value = self._open_value("bl", tk.thread_id, blob_field, blobs.get(blob_field))
            except RecordDamagedError as exc:
                reason = f"{exc.reason} channel value {channel!r}@{version}"
                quarantine = [] if exc.reason == "missing" else [("bl", blob_field, exc.reason)]
                quarantine.append(("cp", decoded.member, reason))
                return _Damage(decoded.member, decoded.checkpoint_id, tk.bl, reason, quarantine)
            if value is not _NO_VALUE:
                values[channel] = value
        # A task whose writes are not all intact must run again as a whole: keeping its
        # other writes would mark it done and lose what the damaged one carried.
        opened: list[tuple[str, str, Any]] = []
        damaged: dict[str, str] = {}  # write member -> reason
        damaged_tasks: dict[str, str] = {}
        for raw_member, record in decoded.writes:
            try:
                write_member = _text(raw_member)
                task_id = self.keys.parse_write_member(write_member).task_id
            except ValueError:  # not a member this saver wrote: drop it from the index
                decoded.dropped_writes.append(("wr", raw_member, MALFORMED))
                continue
            try:
                channel, value = self._open_value("wr", tk.thread_id, write_member, record)
            except (RecordDamagedError, ValueError) as exc:
                damaged[write_member] = getattr(exc, "reason", "undecodable body")
                damaged_tasks.setdefault(task_id, damaged[write_member])
                continue
            opened.append((task_id, channel, value))
        pending: list[PendingWrite] = [w for w in opened if w[0] not in damaged_tasks]
        for task_id, reason in damaged_tasks.items():
            self._drop_task_writes(tk, decoded, task_id, reason, damaged, report)
        return CheckpointTuple(
            config=checkpoint_config(tk.thread_id, decoded.checkpoint_ns, decoded.checkpoint_id),
            checkpoint={**decoded.checkpoint, "channel_values": values},  # type: ignore[typeddict-item]
            metadata=decoded.metadata,
            parent_config=(
                checkpoint_config(tk.thread_id, decoded.checkpoint_ns, decoded.parent_id)
                if decoded.parent_id
                else None
            ),
            pending_writes=pending,
        )

    def _drop_task_writes(
        self,
        tk: ThreadKeys,
        decoded: _Decoded,
        task_id: str,
        reason: str,
        damaged: Mapping[str, str],
        report: RecoveryReport | None,
    ) -> None:
        """Drop (and queue for quarantine) every pending write of a task with a damaged one."""
        logger.warning(
            "langgraph-durable: dropped the pending writes of task %s of checkpoint %s "
            "(thread %r), which will run again: %s",
            task_id,
            decoded.checkpoint_id,
            tk.thread_id,
            reason,
        )
        for raw_member, _ in decoded.writes:
            write_member = _label(raw_member)
            if _task_of(self.keys, write_member) == task_id:
                why = damaged.get(write_member) or f"sibling of a damaged write: {reason}"
                decoded.dropped_writes.append(("wr", write_member, why))
        if report is not None:
            report.dropped_writes.append(
                SkippedCheckpoint(decoded.checkpoint_id, tk.wr, f"task {task_id}: {reason}")
            )

    def _read(
        self,
        tk: ThreadKeys,
        args: list[Any],
        wanted: Callable[[_Decoded], bool] | None = None,
        report: RecoveryReport | None = None,
        guess: Sequence[str] = (),
    ) -> Plan[tuple[list[CheckpointTuple | _Damage], list[str]]]:
        """Read checkpoints: records and writes, then the channel values they name.

        The values of ``guess`` (blob fields) are read in the same round trip as the
        records; when they are all the checkpoints need, that is the only round trip.
        Returns the results in index order, and the ids of every checkpoint the index
        returned (matching ``wanted`` or not), oldest last: the next page's cursor.
        """
        entries, blobs = yield from self._read_entries(tk, args, guess)
        decoded = [self._decode_entry(tk, entry) for entry in entries]
        selected = [d for d in decoded if isinstance(d, _Damage) or wanted is None or wanted(d)]
        fields = sorted(
            {f for d in selected if isinstance(d, _Decoded) for f in self._blob_fields(d)}
            - blobs.keys()
        )
        if fields:
            blobs.update((yield from self._read_values(tk, fields)))
        missing = {f for f, v in blobs.items() if v is None}
        lacking = [
            d
            for d in selected
            if isinstance(d, _Decoded) and missing.intersection(self._blob_fields(d))
        ]
        if lacking:  # damage, or deleted between the two reads? (recheck_values.lua)
            wanted_fields = sorted(missing)
            stored, values = yield Script(
                "recheck_values",
                tk.all(),
                [len(lacking), *(d.member for d in lacking), *wanted_fields],
            )
            vanished = {d.member for d, still in zip(lacking, stored) if not int(still)}
            selected = [
                d for d in selected if not (isinstance(d, _Decoded) and d.member in vanished)
            ]
            blobs.update((f, v) for f, v in zip(wanted_fields, values) if v)
        results = [
            d if isinstance(d, _Damage) else self._complete(tk, d, blobs, report) for d in selected
        ]
        damaged = [r for r in results if isinstance(r, _Damage)]
        dropped = [w for d in selected if isinstance(d, _Decoded) for w in d.dropped_writes]
        if (damaged or dropped) and self.repair_on_read:
            yield from self._quarantine(tk, damaged, dropped)
        return results, [d.checkpoint_id for d in decoded]

    def _read_entries(
        self, tk: ThreadKeys, args: list[Any], guess: Sequence[str] = ()
    ) -> Plan[tuple[list[Any], dict[str, bytes | None]]]:
        """The read script's entries, and the values of ``guess`` read in the same round
        trip. Not in MULTI, which Redis refuses when out of memory: a value deleted
        between the two is told from damage by ``_read``."""
        script = Script("read_checkpoints", tk.all(), args)
        for attempt in (1, 2):
            if not guess:
                wrongtype, unindexed, *entries = yield script
                values: Any = None
            else:
                reply, values = yield Batch([script, _hmget(tk, guess)], errors_as_values=True)
                if isinstance(reply, Exception):
                    raise self.script_error(script, reply)
                wrongtype, unindexed, *entries = reply
            self._log_wrongtype(tk, wrongtype)
            if not unindexed or attempt == 2 or not (yield from self._reindex(tk, unindexed)):
                break
        return entries, (self._values(tk, guess, values) if guess else {})

    def _reindex(self, tk: ThreadKeys, unindexed: Sequence[bytes | str]) -> Plan[bool]:
        """Put back the index members of records an index lacks (its key was evicted or
        lost in a bad restore), so no checkpoint or pending write silently vanishes.
        True when members were put back: the caller reads again. A read that may not
        write (``repair_on_read=False``, a read-only replica or ACL user) logs instead."""
        kinds = ", ".join(_label(k) for k in unindexed)
        if self.repair_on_read:
            (added,) = yield Batch(
                [Script("reindex", tk.with_twins(), [self._ttl_arg])], errors_as_values=True
            )
            if not isinstance(added, Exception):
                logger.error(
                    "langgraph-durable: index %s of thread %r lacked %d stored records "
                    "(evicted or lost in a restore?): put back",
                    kinds,
                    tk.thread_id,
                    added,
                )
                return bool(added)
        logger.error(
            "langgraph-durable: index %s of thread %r lacks stored records (evicted or lost "
            "in a restore?): they are not read until `langgraph-durable verify --repair`",
            kinds,
            tk.thread_id,
        )
        return False

    def _read_values(self, tk: ThreadKeys, fields: list[str]) -> Plan[dict[str, bytes | None]]:
        (values,) = yield Batch([_hmget(tk, fields)], errors_as_values=True)
        return self._values(tk, fields, values)

    def _values(
        self, tk: ThreadKeys, fields: Sequence[str], reply: list[Any] | Exception
    ) -> dict[str, bytes | None]:
        if isinstance(reply, Exception):
            if "WRONGTYPE" not in str(reply):
                raise reply
            self._log_wrongtype(tk, [tk.bl.encode()])
            return dict.fromkeys(fields)  # damage: read as missing
        return dict(zip(fields, reply))

    def _log_wrongtype(self, tk: ThreadKeys, keys: list[bytes]) -> None:
        for key in keys:
            logger.error(
                "langgraph-durable: key %s of thread %r has the wrong type (damaged): "
                "read as empty",
                _label(key),
                tk.thread_id,
            )

    def _quarantine(
        self,
        tk: ThreadKeys,
        damaged: Iterable[_Damage],
        dropped_writes: Iterable[tuple[str, str, str]] = (),
    ) -> Plan[None]:
        args: list[Any] = []
        moves = [m for damage in damaged for m in damage.quarantine] + list(dropped_writes)
        for kind, field_, reason in moves:
            if (kind == "cp" and reason == "missing") or reason.startswith(_CONFIG_REASONS):
                continue  # gone already (its quarantine entry says why) / maybe not damage
            args += [kind, field_, self.keys.quarantine_field(kind, _label(field_)), reason]
        if args:
            # Best effort: a read must not fail because Redis refuses writes (out of
            # memory, a read-only replica or ACL user); the damage is skipped either way.
            script = Script("quarantine", tk.with_twins(), [self._ttl_arg, *args])
            (reply,) = yield Batch([script], errors_as_values=True)
            if isinstance(reply, Exception):
                logger.warning(
                    "langgraph-durable: could not quarantine damaged records of thread %r: %s",
                    tk.thread_id,
                    reply,
                )

    def _log_damage(self, tk: ThreadKeys, damage: _Damage, *, level: int) -> None:
        logger.log(
            level,
            "langgraph-durable: skipped damaged checkpoint %s of thread %r: %s (%s)",
            damage.checkpoint_id,
            tk.thread_id,
            damage.reason,
            damage.key,
        )

    def get_tuple(self, config: RunnableConfig) -> Plan[CheckpointTuple | None]:
        conf = configurable(config)
        thread_id = _thread_id(conf)
        ns = conf.get("checkpoint_ns", "")
        tk = self.keys.thread(thread_id)
        checkpoint_id = conf.get("checkpoint_id")
        if checkpoint_id:
            member = self.keys.checkpoint_member(ns, checkpoint_id)
            results, _ = yield from self._read(tk, ["members", member])
            if not results:  # deleted while it was read (retention, delete_thread)
                return None
            result = results[0]
            if isinstance(result, _Damage):
                if result.reason == "missing" and result.key == tk.cp:
                    # Never stored, deleted, or quarantined by an earlier read: only the
                    # last one is damage, and the quarantine remembers why.
                    quarantined = yield Command(
                        ("HGET", tk.qt, self.keys.quarantine_field("cp", member))
                    )
                    if quarantined is None:
                        return None
                    result.reason = f"quarantined: {_quarantine_reason(quarantined)}"
                raise CheckpointCorruptedError(
                    thread_id=thread_id,
                    checkpoint_ns=ns,
                    checkpoint_id=checkpoint_id,
                    key=result.key,
                    reason=result.reason,
                )
            return result
        report = RecoveryReport(thread_id, ns)
        before: str | None = None
        while True:
            upper, lower = self.keys.namespace_range(ns, before)
            guess = (
                self._fields_of(ns, self._newest_versions.get((thread_id, ns)))
                if before is None
                else ()
            )
            results, fetched = yield from self._read(
                tk, ["range", upper, lower, 1], report=report, guess=guess
            )
            if not results and fetched:
                continue  # deleted while read (retention, delete_thread): read again
            if not results:
                if any(s.reason.startswith(_CONFIG_REASONS) for s in report.skipped):
                    self.recovery_reports[(thread_id, ns)] = report
                    raise UnreadableThreadError(
                        thread_id=thread_id,
                        checkpoint_ns=ns,
                        reasons={s.checkpoint_id: s.reason for s in report.skipped},
                    )
                if report.skipped:
                    self._report(report, level=logging.ERROR)
                return None
            result = results[0]
            if isinstance(result, _Damage):
                self._log_damage(tk, result, level=logging.WARNING)
                report.skipped.append(
                    SkippedCheckpoint(result.checkpoint_id, result.key, result.reason)
                )
                before = result.checkpoint_id
                continue
            if report.skipped or report.dropped_writes:
                report.used_checkpoint_id = result.checkpoint["id"]
                report.recovered_from_step = result.metadata.get("step")
                self._report(report, level=logging.WARNING)
            self._newest_versions.remember((thread_id, ns), result.checkpoint["channel_versions"])
            return result

    def _report(self, report: RecoveryReport, *, level: int) -> None:
        self.recovery_reports[(report.thread_id, report.checkpoint_ns)] = report
        if report.used_checkpoint_id is None and report.skipped:
            logger.log(
                level,
                "langgraph-durable: no checkpoint of thread %r (namespace %r) verifies; "
                "skipped %d damaged: the run starts again from step 0",
                report.thread_id,
                report.checkpoint_ns,
                len(report.skipped),
            )
        elif report.skipped:
            logger.log(
                level,
                "langgraph-durable: thread %r (namespace %r) recovered from checkpoint %s "
                "(step %s) after skipping %d damaged: %s",
                report.thread_id,
                report.checkpoint_ns,
                report.used_checkpoint_id,
                report.recovered_from_step,
                len(report.skipped),
                "; ".join(f"{s.checkpoint_id}: {s.reason}" for s in report.skipped),
            )

    # -- list --------------------------------------------------------------------------
    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Plan[None]:
        before_id = inputs.list_options(filter, before, limit)
        if limit is not None and limit <= 0:
            return
        remaining = [limit]  # shared countdown across threads
        if config is None:
            thread_ids = yield from self._all_thread_ids()
            for thread_id in thread_ids:
                yield from self._list_thread(thread_id, None, None, filter, before_id, remaining)
                if remaining[0] is not None and remaining[0] <= 0:
                    return
            return
        conf = configurable(config, any_namespace=True)
        yield from self._list_thread(
            _thread_id(conf),
            conf.get("checkpoint_ns"),
            conf.get("checkpoint_id"),
            filter,
            before_id,
            remaining,
        )

    def _list_thread(
        self,
        thread_id: str,
        ns: str | None,
        checkpoint_id: str | None,
        filter: dict[str, Any] | None,
        before_id: str | None,
        remaining: list[int | None],
    ) -> Plan[None]:
        tk = self.keys.thread(thread_id)

        def wanted(d: _Decoded) -> bool:
            return not filter or all(d.metadata.get(k) == v for k, v in filter.items())

        def page_size() -> int:
            left = remaining[0]
            return LIST_PAGE if filter or left is None else max(1, min(LIST_PAGE, left))

        if ns is not None and not checkpoint_id:
            # One namespace: walk the sorted index newest first, a page per round trip.
            cursor = before_id
            while True:
                upper, lower = self.keys.namespace_range(ns, cursor)
                size = page_size()
                results, fetched = yield from self._read(tk, ["range", upper, lower, size], wanted)
                for result in results:
                    if (yield from self._emit(tk, result, remaining)):
                        return
                if len(fetched) < size:
                    return
                cursor = fetched[-1]
        # Every namespace of the thread (or one checkpoint id): newest first by id.
        wrongtype, members, unindexed = yield Script("read_index", tk.all(), [])
        self._log_wrongtype(tk, wrongtype)
        if unindexed and (yield from self._reindex(tk, unindexed)):
            _, members, _ = yield Script("read_index", tk.all(), [])
        chosen: list[tuple[str, str]] = []
        for raw in members:
            try:
                member = _text(raw)
                m_ns, m_id = self.keys.parse_checkpoint_member(member)
            except ValueError:
                logger.warning("langgraph-durable: skipped a %s %r", MALFORMED, raw)
                continue
            if ns is not None and m_ns != ns:
                continue
            if checkpoint_id and m_id != checkpoint_id:
                continue
            if before_id and m_id >= before_id:
                continue
            chosen.append((m_id, member))
        chosen.sort(key=lambda pair: pair[0], reverse=True)
        for start in range(0, len(chosen), LIST_PAGE):
            page = [member for _, member in chosen[start : start + LIST_PAGE]]
            results, _ = yield from self._read(tk, ["members", *page], wanted)
            for result in results:
                if (yield from self._emit(tk, result, remaining)):
                    return

    def _emit(
        self, tk: ThreadKeys, result: CheckpointTuple | _Damage, remaining: list[int | None]
    ) -> Plan[bool]:
        """Emit one listed checkpoint; True when the limit is reached."""
        if isinstance(result, _Damage):
            self._log_damage(tk, result, level=logging.WARNING)
            return False
        yield Emit(result)
        if remaining[0] is not None:
            remaining[0] -= 1
            return remaining[0] <= 0
        return False

    # -- whole-thread operations --------------------------------------------------------
    def delete_thread(self, thread_id: str) -> Plan[None]:
        self._newest_versions.forget(str(thread_id))
        yield Command(("UNLINK", *self.keys.thread(str(thread_id)).with_twins()))

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> Plan[None]:
        """Copy every checkpoint (the whole parent chain), write, value and tool-ledger
        entry that verifies.

        Records are re-sealed under the target's identity; damaged ones are not copied.
        """
        src = self.keys.thread(str(source_thread_id))
        dst = self.keys.thread(str(target_thread_id))
        replies = yield Batch(
            [
                ("HGETALL", src.cp),
                ("HGETALL", src.wr),
                ("HGETALL", src.bl),
                ("HGETALL", src.runs),
                ("HGETALL", src.lg),
            ],
            errors_as_values=True,
        )
        (cps, wrs, bls, runs, lgs), wrong = _wrong_type_as_empty(replies, ({},) * 5)
        for i in wrong:
            logger.error(
                "langgraph-durable: copy_thread %r -> %r left out %s, which holds the "
                "wrong type (damaged)",
                src.thread_id,
                dst.thread_id,
                (src.cp, src.wr, src.bl, src.runs, src.lg)[i],
            )
        copied_cps: list[Any] = []
        copied_wrs: list[Any] = []
        copied_bls: list[Any] = []
        copied_lgs: list[Any] = []
        for kind, records, out in (
            ("cp", cps, copied_cps),
            ("wr", wrs, copied_wrs),
            ("bl", bls, copied_bls),
            ("lg", lgs, copied_lgs),
        ):
            for raw_field, record in sorted(records.items()):
                field_ = _label(raw_field)  # a non-UTF-8 field cannot verify: left out below
                try:
                    body = self.envelope.open(
                        KeySchema.identity(kind, src.thread_id, field_), record
                    )
                except RecordDamagedError as exc:
                    logger.warning(
                        "langgraph-durable: copy_thread %r -> %r left out a damaged record %s: %s",
                        src.thread_id,
                        dst.thread_id,
                        field_,
                        exc.reason,
                    )
                    continue
                out += [
                    field_,
                    self.envelope.seal(KeySchema.identity(kind, dst.thread_id, field_), body),
                ]
                if kind == "cp":
                    out.append(runs.get(raw_field, b""))
        if not copied_cps and not copied_lgs:
            return
        yield Script(
            "restore_records",
            dst.with_twins(),
            [
                self._ttl_arg,
                len(copied_cps) // 3,
                len(copied_wrs) // 2,
                len(copied_lgs) // 2,
                *copied_cps,
                *copied_wrs,
                *copied_lgs,
                *copied_bls,
            ],
        )

    def delete_for_runs(self, run_ids: Sequence[str]) -> Plan[None]:
        wanted_runs = {str(r) for r in run_ids}
        if not wanted_runs:
            return
        for thread_id in (yield from self._all_thread_ids()):
            tk = self.keys.thread(thread_id)
            runs = yield Command(("HGETALL", tk.runs))
            doomed = {_label(m) for m, r in runs.items() if _label(r) in wanted_runs}
            if doomed:
                yield from self._collect(tk, lambda decoded, pinned, doomed=doomed: doomed)

    def prune(
        self, thread_ids: Sequence[str], *, strategy: str = "keep_latest", keep_last: int = 1
    ) -> Plan[None]:
        if strategy not in ("keep_latest", "delete"):
            raise ValueError(f"unknown prune strategy {strategy!r}: use 'keep_latest' or 'delete'")
        for thread_id in thread_ids:
            if strategy == "delete":
                yield from self.delete_thread(thread_id)
                continue
            tk = self.keys.thread(str(thread_id))
            yield from self._collect(
                tk, lambda decoded, pinned: _prunable(decoded, keep_last, pinned), pin_valid=True
            )

    def _all_thread_ids(self) -> Plan[list[str]]:
        keys = yield ScanKeys(self.keys.thread_scan_pattern())
        return sorted({t for k in keys if (t := self.keys.thread_id_from_key(k)) is not None})

    def _collect(
        self,
        tk: ThreadKeys,
        choose: Callable[[dict[str, _Decoded], set[str]], set[str]],
        *,
        pin_valid: bool = False,
    ) -> Plan[None]:
        """Delete the checkpoints ``choose`` picks, their writes, and every channel value
        no remaining checkpoint references, in one guarded script call.

        The guard makes the deletion a no-op if a checkpoint was written since it was
        planned (the new one may reference a value planned away); it is then re-planned.
        With ``pin_valid``, ``choose`` is told the newest checkpoint of each namespace that
        verifies completely, so retention never removes the last good fallback.
        """
        for _ in range(PLAN_RETRIES):
            cps, count, newest, blob_fields = yield Batch(
                [
                    ("HGETALL", tk.cp),
                    ("ZCARD", tk.cps),
                    ("ZREVRANGE", tk.cps, 0, 0),
                    ("HKEYS", tk.bl),
                ]
            )
            decoded: dict[str, _Decoded] = {}
            intact = True
            for raw_member, record in cps.items():
                entry = self._decode_entry(tk, [raw_member, record, []])
                if isinstance(entry, _Damage):
                    intact = False  # its references are unknown: keep every value
                else:
                    decoded[entry.member] = entry
            pinned = (yield from self._newest_valid(tk, decoded)) if pin_valid else set()
            doomed = choose(decoded, pinned)
            referenced = {
                f for m, d in decoded.items() if m not in doomed for f in self._blob_fields(d)
            }
            garbage = [] if not intact else [f for f in blob_fields if _label(f) not in referenced]
            if not doomed and not garbage:
                return
            newest_member = newest[0] if newest else b""  # exact bytes, for the guard
            deleted = yield Script(
                "delete_checkpoints",
                tk.with_twins(),
                [self._ttl_arg, count, newest_member, len(doomed), *sorted(doomed), *garbage],
            )
            if deleted != -1:
                yield from self._forget_ledger(tk, decoded, doomed)
                return
        logger.warning(
            "langgraph-durable: gave up pruning thread %r: it kept being written", tk.thread_id
        )

    def _forget_ledger(
        self, tk: ThreadKeys, decoded: dict[str, _Decoded], doomed: set[str]
    ) -> Plan[None]:
        """Drop tool-ledger entries no remaining checkpoint can replay: those of top-level
        tasks at or before the step of the oldest root checkpoint left (a replay runs the
        steps after the checkpoint it starts from)."""
        steps = [
            d.metadata.get("step")
            for m, d in decoded.items()
            if m not in doomed and d.checkpoint_ns == ""
        ]
        if not doomed or not steps or not all(isinstance(s, int) for s in steps):
            return
        oldest = min(steps)  # type: ignore[type-var]
        # also the fields of records whose index member was lost
        _, _, flat, _ = yield Script("ledger_read", tk.with_twins(), ["-", "+", "fields", ""])
        stale = []
        for raw in flat:
            try:
                where = self.keys.parse_ledger_field(raw)
            except (ValueError, UnicodeDecodeError):
                continue
            if "|" not in where.checkpoint_ns and where.step <= oldest:
                stale.append(raw)
        if stale:
            yield Script("ledger_delete", tk.with_twins(), [self._ttl_arg, *stale])

    def _newest_valid(self, tk: ThreadKeys, decoded: dict[str, _Decoded]) -> Plan[set[str]]:
        """Members of the newest checkpoint per namespace whose channel values all verify
        (one HMGET per round; a second round only where the newest was damaged)."""
        queues: dict[str, list[_Decoded]] = {}
        for d in sorted(decoded.values(), key=lambda d: d.checkpoint_id, reverse=True):
            queues.setdefault(d.checkpoint_ns, []).append(d)
        pinned: set[str] = set()
        while queues:
            candidates = {ns: queue.pop(0) for ns, queue in queues.items()}
            fields = sorted({f for d in candidates.values() for f in self._blob_fields(d)})
            values = (yield from self._read_values(tk, fields)) if fields else {}
            for ns, candidate in candidates.items():
                valid = self._values_verify(tk, candidate, values)
                if valid:
                    pinned.add(candidate.member)
                if valid or not queues[ns]:
                    queues.pop(ns)
        return pinned

    def _values_verify(self, tk: ThreadKeys, d: _Decoded, values: Mapping[str, Any]) -> bool:
        try:
            for blob_field in self._blob_fields(d):
                self._open_value("bl", tk.thread_id, blob_field, values.get(blob_field))
        except RecordDamagedError:
            return False
        return True


class _NewestVersions:
    """Per (thread, namespace): the channel versions of the newest checkpoint this saver
    wrote or read. ``get_tuple`` reads those values in the same round trip as the
    checkpoint; a wrong guess costs only a second round trip for the missing ones."""

    def __init__(self, size: int = 4096) -> None:
        self._size = size
        self._versions: dict[tuple[str, str], dict[str, Any]] = {}

    def get(self, key: tuple[str, str]) -> dict[str, Any]:
        return self._versions.get(key, {})

    def remember(self, key: tuple[str, str], versions: Mapping[str, Any]) -> None:
        if len(self._versions) >= self._size:
            self._versions.clear()  # crude, but safe from any thread
        self._versions[key] = dict(versions)  # a copy: the caller's dict may change

    def forget(self, thread_id: str) -> None:
        for key in [k for k in list(self._versions) if k[0] == thread_id]:
            self._versions.pop(key, None)


def _prunable(decoded: dict[str, _Decoded], keep_last: int, pinned: set[str]) -> set[str]:
    """Members to delete so each namespace keeps its ``keep_last`` newest checkpoints and
    the ``pinned`` ones, plus the ancestors (and so their writes) their DeltaChannels are
    rebuilt from."""
    by_ns: dict[str, list[_Decoded]] = {}
    for d in decoded.values():
        by_ns.setdefault(d.checkpoint_ns, []).append(d)
    keep: set[str] = set()
    for ns_entries in by_ns.values():
        ns_entries.sort(key=lambda d: d.checkpoint_id, reverse=True)
        by_id = {d.checkpoint_id: d for d in ns_entries}
        for kept in ns_entries[:keep_last] + [d for d in ns_entries if d.member in pinned]:
            keep.add(kept.member)
            # counters_since_delta_snapshot: supersteps since each DeltaChannel's last
            # snapshot, i.e. how far up the parent chain its seed lies.
            depth = _delta_depth(kept.metadata, whole_chain=len(ns_entries))
            cursor = kept
            for _ in range(depth):
                parent = by_id.get(cursor.parent_id or "")
                if parent is None:
                    break
                keep.add(parent.member)
                cursor = parent
    return {m for m in decoded if m not in keep}


def _delta_depth(metadata: Mapping[str, Any], *, whole_chain: int) -> int:
    """How many ancestors a checkpoint's DeltaChannels are rebuilt from. Metadata that
    does not say it plainly (written by something else) keeps the whole chain: retention
    never deletes what a read may need."""
    counters = metadata.get("counters_since_delta_snapshot") or {}
    try:
        return max((int(c[1]) for c in counters.values()), default=-1) + 1
    except (AttributeError, TypeError, ValueError, IndexError, KeyError):
        logger.warning(
            "langgraph-durable: unreadable counters_since_delta_snapshot %.80r: retention "
            "keeps every ancestor of the checkpoint",
            counters,
        )
        return whole_chain
