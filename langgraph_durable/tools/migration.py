"""Migration from another checkpointer: every thread with its whole history, pending
writes and metadata, copied into a ``RedisSaver`` through LangGraph's public contract.

Owns ``migrate`` / ``migrate_thread`` (the copy, then a verify against the source),
``compare_thread`` (that verify) and ``source_thread_ids``. Rules it keeps:
  * Only the public contract of the source is used (``list``, ``get_tuple``), so any
    ``BaseCheckpointSaver`` with the sync methods can be a source; ``sources.py`` opens
    the usual ones from a string.
  * Each namespace's checkpoints go oldest first, in parent order (the parent links, not
    the ids: ids sort by time only within one process), each ``put`` on its parent's
    config, so ids, timestamps, metadata and parent links are kept exactly.
    ``new_versions`` is the channels whose version differs from the parent's: a value
    is stored once and shared, as the graph itself would have stored it.
  * A checkpoint's pending writes are put before the checkpoint. A checkpoint found in
    Redis therefore has its writes too, and is skipped: a migration killed at any point
    and run again continues where it stopped, without writing anything twice. A
    checkpoint whose pending writes in Redis are not as many as in the source (stopped
    halfway, or the source went on after it was copied) has them replaced, so a run
    after the source's last write brings every thread up to date.
  * ``task_path`` is not part of ``CheckpointTuple.pending_writes`` and so cannot be
    copied; each task gets a path that sorts as the source listed it
    (``~migrated:00000000``...), which keeps ``writes_sort_key`` order, the one thing
    LangGraph reads from the path (DeltaChannel replays).
"""

from __future__ import annotations

import hashlib
import heapq
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import WRITES_IDX_MAP, BaseCheckpointSaver, CheckpointTuple
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from langgraph_durable.core.errors import ConfigurationError, RecordDamagedError
from langgraph_durable.core.ops import Batch, Plan
from langgraph_durable.core.reports import MigrationReport, ThreadMigration
from langgraph_durable.core.saver_core import SaverCore

__all__ = [
    "compare_thread",
    "migrate",
    "migrate_thread",
    "retry_may_help",
    "source_thread_ids",
    "why_it_stopped",
]

_T = TypeVar("_T")


class MigrationTarget(Protocol):
    """What a migration needs of its target: a ``RedisSaver`` (sync; a migration is an
    operator's batch job)."""

    core: SaverCore
    keep_last: int | None

    def drive(self, plan: Plan[_T]) -> _T: ...
    def put(
        self, config: RunnableConfig, checkpoint: Any, metadata: Any, new_versions: Any
    ) -> RunnableConfig: ...
    def put_writes(
        self, config: RunnableConfig, writes: Any, task_id: str, task_path: str = ""
    ) -> None: ...
    def list(self, config: RunnableConfig | None, **kwargs: Any) -> Iterable[CheckpointTuple]: ...
    def verify(self, thread_id: str) -> Any: ...


_Key = tuple[str, str]  # (checkpoint_ns, checkpoint_id)
MIGRATED_TASK_PATH = "~migrated:{:08d}"


@dataclass(frozen=True)
class _Node:
    parent: str | None  # the parent's id, None for a root or a parent the source lacks
    versions: dict[str, Any]  # channel_versions
    writes: int  # how many pending writes


def migrate(
    source: BaseCheckpointSaver,
    target: MigrationTarget,
    *,
    thread_ids: Iterable[str] | None = None,
    verify: bool = True,
    progress: Callable[[ThreadMigration], None] | None = None,
) -> MigrationReport:
    """Copy every thread of ``source`` (or the ``thread_ids`` given) into ``target``.

    Run it again after an interruption: what is in Redis already is skipped. Stop the
    writers of the source first: a checkpoint or pending write added to the source after
    its thread was copied is not copied (the verify reports it).

    Args:
        source: any checkpointer with the sync methods (``list``, ``get_tuple``).
        target: the ``RedisSaver`` to copy into (an ``AsyncRedisSaver`` works too from a
            thread that is not its event loop's), without ``keep_last`` (it would drop the
            history as it is copied: ``prune`` after).
        thread_ids: the threads to copy; None for every thread ``source.list(None)``
            yields (a read of the whole source).
        verify: compare each thread with the source after copying it (a second read
            of the source) and run ``target.verify`` on it.
        progress: called with each thread's ``ThreadMigration`` once it is done.

    Returns:
        A ``MigrationReport``: ``ok`` when every thread copied and verified equal.

    Raises:
        ConfigurationError: ``target`` has ``keep_last``.
        Whatever the source or Redis raise. ``retry_may_help(exc)`` says whether running
        it again can get further (a connection lost, a timeout, a failover); else the
        source cannot be read as it is (``why_it_stopped`` says what to change).
    """
    _check_target(target)
    ids = source_thread_ids(source) if thread_ids is None else list(thread_ids)
    report = MigrationReport()
    for thread_id in ids:
        result = migrate_thread(source, target, thread_id, verify=verify)
        report.threads.append(result)
        if progress is not None:
            progress(result)
    return report


# Errors of a server that went away for a while: running again may get further.
_PASSING = frozenset(
    {"ConnectionError", "TimeoutError", "BusyLoadingError", "TryAgainError",
     "MasterNotFoundError", "SlaveNotFoundError", "ReadOnlyError"}
)  # fmt: skip


def retry_may_help(exc: BaseException) -> bool:
    """Whether running a stopped migration again may get past ``exc``: a connection lost
    or refused, a timeout, a server loading or failing over (redis-py's, psycopg's and the
    builtin kinds, a locked SQLite file). Not an error in what the source holds or needs
    (a missing table or Redis module, a value it cannot read): that stops every run."""
    names = {cls.__name__ for cls in type(exc).__mro__}
    if isinstance(exc, OSError) or names & _PASSING:
        return True
    module = type(exc).__module__
    if module.startswith("psycopg") and "OperationalError" in names:
        return True  # psycopg: the connection, not the SQL
    text = str(exc).lower()
    return module == "sqlite3" and ("locked" in text or "busy" in text)


def why_it_stopped(exc: BaseException) -> str:
    """What a user should do about an error that stopped a migration (for its one line)."""
    if retry_may_help(exc):
        return "run the same command again to continue: what is in Redis already is skipped"
    text = str(exc)
    if isinstance(exc, RecordDamagedError) and "refused" in text:
        return (
            "a source row names a type the saver does not construct: it is not run. If it "
            "is a type of your graph's state, name it with --allow-type MODULE:NAME "
            "(allowed_types= in Python)"
        )
    if "unknown command" in text.lower() and any(m in text for m in ("FT.", "JSON.")):
        return (
            "running it again will not help: the source's saver needs Redis modules its "
            "server lacks (langgraph-checkpoint-redis needs RedisJSON and RediSearch: Redis "
            "8 or Redis Stack); point it at the Redis that holds its threads"
        )
    return (
        "running it again will not help until the source can be read; what is in Redis "
        "already stays"
    )


def source_thread_ids(source: BaseCheckpointSaver) -> list[str]:
    """Every thread id ``source.list(None)`` yields, sorted (values are read, not kept)."""
    return sorted({str(tup.config["configurable"]["thread_id"]) for tup in source.list(None)})


def migrate_thread(
    source: BaseCheckpointSaver, target: MigrationTarget, thread_id: str, *, verify: bool = True
) -> ThreadMigration:
    """Copy one thread, every namespace (see ``migrate``), then verify it if asked."""
    _check_target(target)
    result = ThreadMigration(thread_id)
    # The shape of the history first; values are fetched one checkpoint at a time, so a
    # long thread never sits in memory whole.
    nodes: dict[_Key, _Node] = {}
    for tup in source.list(_thread(thread_id)):
        nodes[_key(tup)] = _Node(
            _parent_id(tup), dict(tup.checkpoint["channel_versions"]), len(tup.pending_writes or ())
        )
    result.checkpoints = len(nodes)
    present, writes_present = target.drive(_present(target.core, thread_id))
    order = _oldest_first(nodes)
    for key in sorted(nodes.keys() - set(order)):
        result.mismatches.append(f"{_name(key)} is on or under a loop of parents: not copied")
    for key in order:
        ns, checkpoint_id = key
        there = writes_present.get(key, [])
        if key in present and len(there) == nodes[key].writes:
            result.already_there += 1
            continue
        tup = source.get_tuple(_thread(thread_id, ns, checkpoint_id))
        if tup is None:
            result.mismatches.append(f"{_name(key)} left the source while copied")
            return result
        if there and len(there) != len(tup.pending_writes or ()):
            # Half copied, or the source went on: the paths given (the source's order)
            # may have shifted, so the writes are put again from scratch.
            target.drive(_drop_writes(target.core, thread_id, there))
        result.writes += _put_writes(target, thread_id, ns, checkpoint_id, tup.pending_writes)
        if key in present:  # copied before; the source has written to it since
            result.already_there += 1
            continue
        parent = nodes[key].parent
        if parent is not None and (ns, parent) not in nodes:
            parent = None  # the source lost it (pruned): the copy starts the chain
        base = nodes[(ns, parent)].versions if parent is not None else {}
        versions = tup.checkpoint["channel_versions"]
        target.put(
            _thread(thread_id, ns, parent),
            tup.checkpoint,
            tup.metadata,
            {c: v for c, v in versions.items() if base.get(c) != v},
        )
        result.copied += 1
    if verify:
        result.mismatches += compare_thread(source, target, thread_id)
        result.verified = True
    return result


def compare_thread(
    source: BaseCheckpointSaver, target: MigrationTarget, thread_id: str
) -> list[str]:
    """How ``target``'s copy of a thread differs from ``source``'s, one line each: every
    checkpoint's id, parent, checkpoint (channel values included), metadata and pending
    writes, then ``target.verify``. Empty when they are equal."""
    want = {_key(t): _digest(t) for t in source.list(_thread(thread_id))}
    for key, digest in want.items():  # a parent the source lost is not copied either
        if digest.parent is not None and (key[0], digest.parent) not in want:
            want[key] = _Digest(None, digest.checkpoint, digest.metadata, digest.writes)
    got = {_key(t): _digest(t) for t in target.list(_thread(thread_id))}
    problems = [f"{_name(k)} is missing from Redis" for k in sorted(want.keys() - got.keys())]
    problems += [
        f"{_name(k)} is in Redis, not in the source" for k in sorted(got.keys() - want.keys())
    ]
    for key in sorted(want.keys() & got.keys()):
        differ = [
            f for f in _Digest.__dataclass_fields__ if getattr(want[key], f) != getattr(got[key], f)
        ]
        if differ:
            problems.append(f"{_name(key)} differs in: {', '.join(differ)}")
    report = target.verify(thread_id)
    problems += [f"verify: {f.kind} {f.field!r}: {f.reason}" for f in report.findings]
    if report.quarantined:
        problems.append(f"verify: {report.quarantined} records quarantined")
    return problems


# -- copying ------------------------------------------------------------------------------
def _check_target(target: MigrationTarget) -> None:
    if target.keep_last:
        raise ConfigurationError(
            f"the target saver has keep_last={target.keep_last}, which would drop history as "
            "it is copied: migrate with a saver without keep_last, then prune"
        )


def _present(core: SaverCore, thread_id: str) -> Plan[tuple[set[_Key], dict[_Key, list[Any]]]]:
    """The checkpoints of the thread already indexed in Redis (a checkpoint is indexed
    in the script that stores it, so an indexed one is whole), and the pending writes
    each checkpoint has there (their index members)."""
    tk = core.keys.thread(thread_id)
    checkpoints, writes = yield Batch([("ZRANGE", tk.cps, 0, -1), ("ZRANGE", tk.wix, 0, -1)])
    by_checkpoint: dict[_Key, list[Any]] = {}
    for member in writes:
        w = core.keys.parse_write_member(member)
        by_checkpoint.setdefault((w.checkpoint_ns, w.checkpoint_id), []).append(member)
    return {core.keys.parse_checkpoint_member(m) for m in checkpoints}, by_checkpoint


def _drop_writes(core: SaverCore, thread_id: str, members: list[Any]) -> Plan[None]:
    """Delete these pending writes of the thread, records and index entries, at once."""
    tk = core.keys.thread(thread_id)
    yield Batch([("HDEL", tk.wr, *members), ("ZREM", tk.wix, *members)], atomic=True)


def _oldest_first(nodes: dict[_Key, _Node]) -> list[_Key]:
    """Every checkpoint after its parent, ids ascending among those ready; a checkpoint
    on a loop of parent links (a damaged source) is never ready and left out."""
    children: dict[_Key, list[_Key]] = {}
    ready: list[_Key] = []
    for key, node in nodes.items():
        parent = (key[0], node.parent)
        if node.parent is not None and parent in nodes:
            children.setdefault(parent, []).append(key)
        else:
            ready.append(key)
    heapq.heapify(ready)
    order = []
    while ready:
        key = heapq.heappop(ready)
        order.append(key)
        for child in children.get(key, ()):
            heapq.heappush(ready, child)
    return order


def _put_writes(
    target: MigrationTarget,
    thread_id: str,
    ns: str,
    checkpoint_id: str,
    pending: Sequence[tuple[str, str, Any]],
) -> int:
    """Put a checkpoint's pending writes, one ``put_writes`` per task, tasks in the order
    the source listed them (``writes_sort_key`` order, kept by the paths given)."""
    tasks: dict[str, list[tuple[str, Any]]] = {}
    for task_id, channel, value in pending:
        tasks.setdefault(task_id, []).append((channel, value))
    config = _thread(thread_id, ns, checkpoint_id)
    for rank, (task_id, writes) in enumerate(tasks.items()):
        # regular writes first: their index is their position; special ones have fixed indexes
        ordered = [w for w in writes if w[0] not in WRITES_IDX_MAP]
        ordered += [w for w in writes if w[0] in WRITES_IDX_MAP]
        target.put_writes(config, ordered, task_id, MIGRATED_TASK_PATH.format(rank))
    return len(pending)


# -- comparing ----------------------------------------------------------------------------
@dataclass(frozen=True)
class _Digest:
    """A checkpoint as hashes: two are equal when what they hold is equal."""

    parent: str | None
    checkpoint: bytes
    metadata: bytes
    writes: bytes


_FINGERPRINT = JsonPlusSerializer(pickle_fallback=True)  # only dumps: never loads a pickle


def _digest(tup: CheckpointTuple) -> _Digest:
    return _Digest(
        _parent_id(tup),
        _hash(tup.checkpoint),
        _hash(tup.metadata),
        _hash([list(w) for w in tup.pending_writes or ()]),
    )


def _hash(value: Any) -> bytes:
    return hashlib.blake2b(repr(_canon(value)).encode(), digest_size=16).digest()


def _canon(value: Any) -> Any:
    """``value`` in a form equal for equal contents: dicts in key order (PostgreSQL's
    JSONB reorders keys), lists and tuples alike, anything else as serialized."""
    if isinstance(value, dict):
        return ("d", sorted((repr(k), _canon(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return ("l", [_canon(v) for v in value])
    return _FINGERPRINT.dumps_typed(value)


# -- configs ------------------------------------------------------------------------------
def _thread(
    thread_id: str, ns: str | None = None, checkpoint_id: str | None = None
) -> RunnableConfig:
    conf: dict[str, Any] = {"thread_id": thread_id}
    if ns is not None:
        conf["checkpoint_ns"] = ns
    if checkpoint_id is not None:
        conf["checkpoint_id"] = checkpoint_id
    return {"configurable": conf}


def _key(tup: CheckpointTuple) -> _Key:
    conf = tup.config["configurable"]
    return conf.get("checkpoint_ns", ""), conf["checkpoint_id"]


def _parent_id(tup: CheckpointTuple) -> str | None:
    return ((tup.parent_config or {}).get("configurable") or {}).get("checkpoint_id")


def _name(key: _Key) -> str:
    ns, checkpoint_id = key
    return f"checkpoint {checkpoint_id}" + (f" (namespace {ns!r})" if ns else "")
