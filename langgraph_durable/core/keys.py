"""The key schema: the only place Redis key names, hash fields and index members are built.

Layout of one thread (``P`` is the key prefix, ``T`` the escaped thread id; the braces
make ``T`` the Redis Cluster hash tag, so every key of a thread lives in one slot)::

    P:{T}:cps   ZSET  checkpoint index, score 0, members  ns SEP checkpoint_id
    P:{T}:wix   ZSET  write index, score 0, members  ns SEP checkpoint_id SEP task_path
                      SEP task_id SEP idx  (lex order == LangGraph's writes_sort_key)
    P:{T}:cp    HASH  checkpoint member -> enveloped checkpoint record
    P:{T}:wr    HASH  write member      -> enveloped pending-write record
    P:{T}:bl    HASH  ns SEP channel SEP version -> enveloped channel value
    P:{T}:runs  HASH  checkpoint member -> run_id (for delete_for_runs), and one
                      ``LEDGER_RUN SEP run_id`` member per run that recorded ledger
                      entries, so the thread's runs are all here (delete_thread takes
                      the thread out of each run's index set)
    P:{T}:qt    HASH  quarantined (damaged) records, kept for forensics
    P:{T}:lg    HASH  ledger field -> enveloped tool-call ledger entry
    P:{T}:lgx   ZSET  ledger index, score 0, members == ledger fields:  ns SEP step
                      SEP task SEP execution SEP call position SEP tool name SEP args
                      hash (the execution: ledger/executions.py; fields written before
                      it have none), and one ``VOID SEP run_id`` field per rolled-back
                      run (core/ledger_rollback.py)
    P:{T}:sub   ZSET  timeline of the subgraph namespaces, score 0, members
                      checkpoint_id SEP ns for every ``cps`` member whose ns is not ""
                      (its "timeline member"): with ``cps``' root range, it gives every
                      namespace's checkpoints newest first by id in O(log n) (``list``
                      without a namespace); a graph without subgraphs leaves it empty
    P:{T}:el    HASH  element digest (16 raw bytes) -> stored element: the elements of
                      list-valued channels, each stored once per thread, which a channel
                      value's manifest names by digest (elements.py)
    P:{T}:gen   STRING  the thread's write generation: every checkpoint, pending-write
                      or copy write increments it, and a retention deletion planned at
                      one generation does nothing at another (delete_checkpoints.lua)
    P:{T}:head  HASH  escaped ns -> the signed head of the namespace (``signing_key`` only):
                      a record naming its newest checkpoint, written with it, so a
                      removed tail is told from a thread that never went further
                      (heads.py)
    P:{T}:<kind>:damaged  a key a write found holding the wrong type, moved aside
    P:{T}:lease STRING  owner SEP fencing token of the worker holding the thread, with a
                      PX expiry (see lease.py)
    P:{T}:fence STRING  the newest fencing token handed out for the thread

Outside any thread (its own slot on a cluster)::

    P:run:{R}   SET   thread ids a run (``R``, escaped like a thread id) wrote
                      checkpoints to: the run index of ``delete_for_runs`` (runs.py)
    P:run-index STRING  set once every thread of the prefix is in the run index

Members are built so that the writes of a checkpoint are exactly the ``wix`` members in
``[member SEP, member SEP+1)``; the Lua scripts rely on that and on nothing else here.

Components are escaped so that ordering is preserved and no component can contain the
separator: ``\\x00 -> \\x01\\x01`` and ``\\x01 -> \\x01\\x02``. Thread ids are
percent-encoded (everything but ``[A-Za-z0-9._~-]``), so the tag never holds ``{``,
``}``, ``:`` or a glob character and two thread ids can never share a tag.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from urllib.parse import quote, unquote

from langgraph_durable.core import inputs

DEFAULT_KEY_PREFIX = "lgd"  # every key starts with it unless a saver is given another
SEP = "\x00"
LEDGER_RECORD = "lg"  # the record kind bound into each ledger record's seal
_SEP_AFTER = "\x01"  # the smallest string greater than every "... SEP ..." continuation
_IDX_OFFSET = 2**31  # write indexes are negative for special channels (-1..-4)

THREAD_KEY_KINDS = (
    "cps", "wix", "cp", "wr", "bl", "runs", "qt", "lg", "lgx", "sub", "el", "gen", "head"
)  # fmt: skip
_THREAD_MARKING_KINDS = frozenset({"cps", "cp", "lg", "lgx"})
# Not data: the lease expires on its own clock, so the thread's ttl must never touch it.
LEASE_KEY_KINDS = ("lease", "fence")
_THREAD_CACHE_SIZE = 4096  # ThreadKeys kept per KeySchema: escaping and 20 key strings per call


def _escape_component(value: str) -> str:
    if "\x00" not in value and "\x01" not in value:  # nearly always: skip two copies
        return value
    return value.replace("\x01", "\x01\x02").replace("\x00", "\x01\x01")


def _unescape_component(value: str) -> str:
    return value.replace("\x01\x01", "\x00").replace("\x01\x02", "\x01")


def _join(*parts: str) -> str:
    joined = SEP.join(parts)
    # Nearly always nothing to escape: one scan of the result instead of one per part.
    if joined.count(SEP) == len(parts) - 1 and _SEP_AFTER not in joined:
        return joined
    return SEP.join(map(_escape_component, parts))


def _split(member: str | bytes) -> list[str]:
    text = member.decode() if isinstance(member, bytes) else member
    return [_unescape_component(p) for p in text.split(SEP)]


def escape_thread_id(thread_id: str) -> str:
    # An empty hash tag "{}" is no tag at all to Redis Cluster (the keys of the thread
    # would scatter over slots): the empty id gets "%", which no other id escapes to.
    return quote(thread_id, safe="") or "%"


def _glob_escape(text: str) -> str:
    return "".join("\\" + c if c in "*?[]\\" else c for c in text)


@dataclass(frozen=True)
class ThreadKeys:
    """All Redis keys of one thread, in one cluster slot."""

    thread_id: str
    cps: str
    wix: str
    cp: str
    wr: str
    bl: str
    runs: str
    qt: str
    lg: str
    lgx: str
    sub: str
    el: str
    gen: str
    head: str
    lease: str
    fence: str

    def all(self) -> list[str]:
        """Every key of the thread, in the order the Lua scripts expect as KEYS."""
        return list(self._all)

    def damaged(self) -> list[str]:
        """Where a write moves a key it finds holding the wrong type, in ``all()`` order."""
        return [key + ":damaged" for key in self._all]

    def for_writes(self) -> list[str]:
        """KEYS of the write scripts: the thread's data keys, then the lease and the fence."""
        return list(self._for_writes)

    def with_twins(self) -> list[str]:
        """``for_writes()`` and then the ``damaged`` twins: KEYS of the scripts that move a
        key of the wrong type aside (a write script asks for them when it finds one)."""
        return list(self._with_twins)

    # Built once per thread (KeySchema caches ThreadKeys), not on every write.
    @cached_property
    def _all(self) -> tuple[str, ...]:
        return (
            self.cps,
            self.wix,
            self.cp,
            self.wr,
            self.bl,
            self.runs,
            self.qt,
            self.lg,
            self.lgx,
            self.sub,
            self.el,
            self.gen,
            self.head,
        )

    @cached_property
    def _for_writes(self) -> tuple[str, ...]:
        return (*self._all, self.lease, self.fence)

    @cached_property
    def _with_twins(self) -> tuple[str, ...]:
        return (*self._for_writes, *self.damaged())


@dataclass(frozen=True)
class WriteMember:
    checkpoint_ns: str
    checkpoint_id: str
    task_path: str
    task_id: str
    idx: int


@dataclass(frozen=True)
class LedgerField:
    checkpoint_ns: str
    step: int
    task: str
    position: int
    name: str
    args_hash: str
    execution: str = ""  # "" for a field written before executions were recorded


# Ledger fields of rolled-back runs start with this: escaped components never hold
# "\x01\x03", so no task's field can.
_LEDGER_VOID = "\x01\x03void" + SEP
_LEDGER_RUN = "\x01\x03ledger" + SEP
_LEDGER_ACK = "\x01\x03ack" + SEP  # an operator's acknowledgement of quarantined damage


class KeySchema:
    """Builds and parses every key string, field and index member for one key prefix."""

    def __init__(self, prefix: str = "lgd") -> None:
        if not isinstance(prefix, str) or not prefix:
            raise ValueError("key_prefix must be a non-empty string")
        if "{" in prefix or "}" in prefix:
            raise ValueError(
                f"key_prefix {prefix!r} must not contain '{{' or '}}': the thread id is "
                "the Redis Cluster hash tag"
            )
        self.prefix = prefix
        self._threads: dict[str, ThreadKeys] = {}

    # -- keys ---------------------------------------------------------------------------
    def thread(self, thread_id: str) -> ThreadKeys:
        if not isinstance(thread_id, str):
            raise TypeError(f"thread_id must be a str, got {type(thread_id).__name__}")
        cached = self._threads.get(thread_id)
        if cached is not None:
            return cached
        inputs.text(thread_id, "thread_id")  # every thread id passes here: no lone surrogates
        base = f"{self.prefix}:{{{escape_thread_id(thread_id)}}}:"
        tk = ThreadKeys(thread_id, *(base + kind for kind in THREAD_KEY_KINDS + LEASE_KEY_KINDS))
        if len(self._threads) >= _THREAD_CACHE_SIZE:
            self._threads.clear()  # crude, but safe from any thread; refills in one call each
        self._threads[thread_id] = tk
        return tk

    def run(self, run_id: str) -> str:
        """The run index key of ``run_id`` (runs.py)."""
        inputs.text(run_id, "run_id")
        return f"{self.prefix}:run:{{{escape_thread_id(run_id)}}}"

    def run_index_marker(self) -> str:
        """Set once every thread of the prefix is in the run index (runs.py)."""
        return f"{self.prefix}:run-index"

    def thread_scan_pattern(self) -> str:
        """SCAN MATCH pattern for the keys that make a thread exist: its checkpoint
        index and hash, and its ledger (a thread whose checkpoint index was evicted, or
        that holds only ledger entries, is still found). Filter with ``thread_id_from_key``."""
        return f"{_glob_escape(self.prefix)}:{{*}}:[cl][pg]*"

    def thread_id_from_key(self, key: str | bytes) -> str | None:
        """The thread id of one of the keys ``thread_scan_pattern`` matches, else None."""
        text = key.decode() if isinstance(key, bytes) else key
        head = f"{self.prefix}:{{"
        if not text.startswith(head):
            return None
        tag, sep, kind = text[len(head) :].rpartition("}:")
        if not sep or kind not in _THREAD_MARKING_KINDS or "{" in tag or "}" in tag:
            return None
        return "" if tag == "%" else unquote(tag)

    # -- checkpoint members -------------------------------------------------------------
    def checkpoint_member(self, checkpoint_ns: str, checkpoint_id: str) -> str:
        return _join(checkpoint_ns, checkpoint_id)

    def parse_checkpoint_member(self, member: str | bytes) -> tuple[str, str]:
        ns, cid = _split(member)
        return ns, cid

    def namespace_range(self, checkpoint_ns: str, before_id: str | None = None) -> tuple[str, str]:
        """(max, min) ZREVRANGEBYLEX bounds over one namespace's checkpoints, newest first."""
        ns = _escape_component(checkpoint_ns) + SEP
        upper = (
            "(" + ns + before_id
            if before_id
            else "(" + _escape_component(checkpoint_ns) + _SEP_AFTER
        )
        return upper, "[" + ns

    def timeline_cursor(self, before_id: str) -> str:
        """The ``list`` cursor (exclusive) over every namespace that starts just before
        checkpoint ``before_id``: ``read_checkpoints.lua`` mode "all" walks timeline
        members (``checkpoint_id SEP ns``) below it."""
        return _escape_component(before_id)

    def timeline_id(self, cursor: str | bytes) -> str | None:
        """The checkpoint id of a ``list`` cursor over every namespace (a timeline member
        or a bare id), None for one that is not text (a damaged member)."""
        try:
            return _split(cursor)[0]
        except UnicodeDecodeError:
            return None

    # -- write members ------------------------------------------------------------------
    def write_member(
        self, checkpoint_ns: str, checkpoint_id: str, task_path: str, task_id: str, idx: int
    ) -> str:
        return _join(checkpoint_ns, checkpoint_id, task_path, task_id, f"{idx + _IDX_OFFSET:010d}")

    def parse_write_member(self, member: str | bytes) -> WriteMember:
        ns, cid, task_path, task_id, idx = _split(member)
        return WriteMember(ns, cid, task_path, task_id, int(idx) - _IDX_OFFSET)

    def writes_of_checkpoint_range(self, checkpoint_member: str) -> tuple[str, str]:
        """(min, max) ZRANGEBYLEX bounds over the writes of one checkpoint."""
        return "[" + checkpoint_member + SEP, "(" + checkpoint_member + _SEP_AFTER

    # -- channel values -----------------------------------------------------------------
    def blob_field(self, checkpoint_ns: str, channel: str, version: str | float) -> str:
        field_ = f"{checkpoint_ns}{SEP}{channel}{SEP}{version}"
        # Nearly always nothing to escape: one scan instead of three joins (hot on reads).
        if field_.count(SEP) == 2 and _SEP_AFTER not in field_:
            return field_
        return _join(checkpoint_ns, channel, str(version))

    def parse_blob_field(self, field: str | bytes) -> tuple[str, str, str]:
        """(namespace, channel, version) of a blob field."""
        ns, channel, version = _split(field)
        return ns, channel, version

    # -- tool-call ledger ----------------------------------------------------------------
    def ledger_task(self, checkpoint_ns: str, step: int, task: str) -> str:
        """The prefix every ledger field of one task starts with (it ends with SEP)."""
        return _join(checkpoint_ns, f"{step + _IDX_OFFSET:010d}", task) + SEP

    def ledger_field(
        self, task_prefix: str, execution: str, position: int, name: str, args_hash: str
    ) -> str:
        if not execution:  # an execution recorded before executions were: its own layout
            return task_prefix + _join(f"{position:07d}", name, args_hash)
        return task_prefix + _join(execution, f"{position:07d}", name, args_hash)

    def parse_ledger_field(self, field: str | bytes) -> LedgerField:
        parts = _split(field)
        execution = parts.pop(3) if len(parts) == 7 else ""
        ns, step, task, position, name, args_hash = parts  # ValueError for anything else
        return LedgerField(
            ns, int(step) - _IDX_OFFSET, task, int(position), name, args_hash, execution
        )

    @staticmethod
    def ledger_void_field(run_id: str) -> str:
        """The ledger field that says run ``run_id`` was rolled back (core/ledger_rollback.py)."""
        return _LEDGER_VOID + _escape_component(run_id)

    @staticmethod
    def head_field(checkpoint_ns: str) -> str:
        """The ``head`` field of a namespace (heads.py)."""
        return _escape_component(checkpoint_ns)

    @staticmethod
    def ledger_run_member(run_id: str) -> str:
        """The ``runs`` member that says run ``run_id`` recorded ledger entries in the
        thread (no checkpoint member starts with \x01: components are escaped)."""
        return _LEDGER_RUN + _escape_component(run_id)

    @staticmethod
    def ledger_ack_field(at: float) -> str:
        """The ledger field of an acknowledgement of the quarantine (core/incidents.py),
        made at ``at`` (seconds): such fields sort by time."""
        return _LEDGER_ACK + f"{int(at * 1000):015d}"

    @staticmethod
    def ledger_ack_range() -> tuple[str, str]:
        """(min, max) ZRANGEBYLEX bounds over the ledger's acknowledgement fields."""
        return "[" + _LEDGER_ACK, "(" + _LEDGER_ACK[: -len(SEP)] + _SEP_AFTER

    @staticmethod
    def is_ledger_ack(field: str | bytes) -> bool:
        """Whether ``field`` is an acknowledgement's (not a recorded call's)."""
        prefix = _LEDGER_ACK.encode() if isinstance(field, bytes) else _LEDGER_ACK
        return field.startswith(prefix)  # type: ignore[arg-type]

    @staticmethod
    def ledger_void_range() -> tuple[str, str]:
        """(min, max) ZRANGEBYLEX bounds over the ledger's rolled-back-run fields."""
        return "[" + _LEDGER_VOID, "(" + _LEDGER_VOID[: -len(SEP)] + _SEP_AFTER

    @staticmethod
    def ledger_void_run(field: str | bytes) -> str | None:
        """The run id of a rolled-back-run field, None for any other field."""
        try:
            text = field.decode() if isinstance(field, bytes) else field
        except UnicodeDecodeError:  # not a field we wrote: the caller reports it
            return None
        if not text.startswith(_LEDGER_VOID):
            return None
        return _unescape_component(text[len(_LEDGER_VOID) :])

    @staticmethod
    def ledger_task_range(task_prefix: str) -> tuple[str, str]:
        """(min, max) ZRANGEBYLEX bounds over the ledger fields of one task."""
        return "[" + task_prefix, "(" + task_prefix[: -len(SEP)] + _SEP_AFTER

    def quarantine_field(self, kind: str, field: str) -> str:
        return _join(kind, field)

    @staticmethod
    def parse_quarantine_field(name: str | bytes) -> tuple[str, str]:
        """(kind, the record's field) of a quarantine entry's name."""
        kind, *field = _split(name if isinstance(name, str) else name.decode("utf-8", "replace"))
        return kind, SEP.join(field)

    # -- record identity (what the envelope's checksum binds a record to) ---------------
    @staticmethod
    def identity(kind: str, thread_id: str, field: str | bytes) -> bytes:
        f = field if isinstance(field, bytes) else field.encode()
        return b"\x00".join((kind.encode(), thread_id.encode(), f))
