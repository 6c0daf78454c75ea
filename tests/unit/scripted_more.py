"""More for driving plans by hand (``scripted.py`` has the basics): one thread's records
as Redis holds them, with namespaces, shared channel versions, metadata, pending writes
and elements, all sealed by the real codec; and the replies of the commands plans send
to read them."""

from __future__ import annotations

from typing import Any

from langgraph.checkpoint.base import Checkpoint, empty_checkpoint

from langgraph_durable.core import codec
from langgraph_durable.core.keys import ThreadKeys
from langgraph_durable.core.ops import Batch
from langgraph_durable.core.saver_core import SaverCore
from tests.unit.scripted import THREAD


def checkpoint_id(step: int) -> str:
    """A checkpoint id that sorts by ``step`` (as uuid6 ids sort by time)."""
    return f"1ef{step:05d}-0000-6000-8000-000000000000"


def version(n: int) -> str:
    return f"{n:032}.0"


class Store:
    """The hashes of one thread (``cp``, ``bl``, ``wr``, ``el``) as a saver sealed them."""

    def __init__(self, core: SaverCore, thread_id: str = THREAD) -> None:
        self.core = core
        self.thread_id = thread_id
        self.tk: ThreadKeys = core.keys.thread(thread_id)
        self.cp: dict[str, bytes] = {}  # checkpoint member -> record
        self.bl: dict[str, bytes] = {}  # blob field -> record
        self.wr: dict[str, bytes] = {}  # write member -> record
        self.el: dict[bytes, bytes] = {}  # element digest -> stored element
        self.versions: dict[str, dict[str, str]] = {}  # member -> its channel versions

    def checkpoint(
        self,
        step: int,
        values: dict[str, Any] | None = None,
        *,
        ns: str = "",
        parent: str | None = None,
        keep: dict[str, int] | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> str:
        """Store a checkpoint of ``ns`` whose channels in ``values`` changed at version
        ``step`` (their values stored) and whose channels in ``keep`` stay at an earlier
        version (stored by an earlier checkpoint); returns its id."""
        checkpoint: Checkpoint = empty_checkpoint()
        checkpoint["id"] = checkpoint_id(step)
        versions = {c: version(v) for c, v in (keep or {}).items()}
        versions.update({c: version(step) for c in values or {}})
        checkpoint["channel_versions"] = versions
        stored = {k: v for k, v in checkpoint.items() if k != "channel_values"}
        member = self.core.keys.checkpoint_member(ns, checkpoint["id"])
        serde = self.core.serde
        meta = {"step": step, **(metadata or {})}
        body = [parent, *serde.dumps_typed(stored), *serde.dumps_typed(meta)]
        self.cp[member] = codec.seal(self.core, "cp", self.thread_id, member, body)
        self.versions[member] = versions
        for channel, value in (values or {}).items():
            self.value(ns, channel, step, value)
        return checkpoint["id"]

    def value(self, ns: str, channel: str, at: int, value: Any) -> str:
        """Store ``value`` as ``channel``'s at version ``at``: its record, and its
        elements when it is a list worth splitting (elements.py)."""
        field = self.core.keys.blob_field(ns, channel, version(at))
        self.bl[field], split = codec.blob_records(self.core, self.thread_id, field, channel, value)
        if split is not None:
            self.el.update(split.stored)
        return field

    def write(
        self,
        checkpoint: str,
        task: str,
        idx: int,
        channel: str,
        value: Any,
        *,
        ns: str = "",
        path: str = "path",
    ) -> str:
        """Store a pending write of ``checkpoint``; returns its member."""
        member = self.core.keys.write_member(ns, checkpoint, path, task, idx)
        self.wr[member], split = codec.write_record(
            self.core, self.thread_id, member, channel, value, "a pending write", True
        )
        if split is not None:
            self.el.update(split.stored)
        return member

    def member(self, checkpoint: str, ns: str = "") -> str:
        return self.core.keys.checkpoint_member(ns, checkpoint)

    def fields_of(self, checkpoint: str, ns: str = "") -> list[str]:
        """The blob fields of a checkpoint's channel values."""
        versions = self.versions[self.member(checkpoint, ns)]
        return [self.core.keys.blob_field(ns, c, v) for c, v in versions.items()]

    # -- replies ----------------------------------------------------------------------
    def hgetall_cp(self) -> dict[bytes, bytes]:
        return {m.encode(): r for m, r in self.cp.items()}

    def hgetall_wr(self) -> dict[bytes, bytes]:
        return {m.encode(): r for m, r in self.wr.items()}

    def hgetall_bl(self) -> dict[bytes, bytes]:
        return {f.encode(): r for f, r in self.bl.items()}

    def entry(self, checkpoint: str, ns: str = "", record: bytes | None = None) -> list[Any]:
        """One entry of ``read_checkpoints.lua`` (member, record, flat writes, lost flag),
        its writes those stored for the checkpoint, in index order."""
        member = self.member(checkpoint, ns)
        prefix = member + "\x00"
        flat: list[Any] = []
        for wm in sorted(w for w in self.wr if w.startswith(prefix)):
            flat += [wm.encode(), self.wr[wm]]
        return [member.encode(), record if record is not None else self.cp[member], flat, 0]

    def hmget(self, op: Batch) -> list[Any]:
        """The replies to a batch of HMGETs of channel values and elements."""
        replies = []
        for command in op.commands:
            assert isinstance(command, tuple) and command[0] == "HMGET", command
            _, key, *names = command
            source: dict[Any, bytes] = self.bl if key == self.tk.bl else self.el
            replies.append([source.get(n) for n in names])
        return replies


def read_reply(*entries: list[Any]) -> list[Any]:
    """A ``read_checkpoints.lua`` reply: no key of the wrong type, no index lacking."""
    return [[], [], *entries]
