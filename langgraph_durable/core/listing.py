"""``list``: checkpoints newest first, a page per round trip, damage skipped.

Owns listing. Rules it keeps:
  * One namespace (the common call) walks the sorted index with ZREVRANGEBYLEX, a page of
    ``LIST_PAGE`` checkpoints (or fewer, for a small ``limit``) per round trip: reads cost
    O(log n) in the length of the thread plus the page.
  * Every namespace of a thread walks the root namespace's range of the index merged
    with the timeline of the subgraph namespaces (``sub``, keys.py) in the read script:
    the same O(log n) plus the page. The order is newest id first; equal ids (rare: ids
    are uuid6) by namespace, descending.
  * One checkpoint id without a namespace reads the index once and the chosen records
    a page at a time.
  * ``list(None)`` walks every thread of the key prefix (a SCAN: an operator's call).
  * A damaged checkpoint is logged and skipped; ``limit`` counts only what is returned.
  * ``refresh_on_read`` refreshes the ttl of a listed thread, not of ``list(None)``'s.
  * A shallow saver (``newest_only``) lists one checkpoint per thread and namespace, the
    one ``get_tuple`` returns (``fallback.py``), whatever retention has not collected yet.
"""

from __future__ import annotations

import logging
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import CheckpointTuple

from langgraph_durable.core import fallback, inputs, reads, values
from langgraph_durable.core.context import PlanContext
from langgraph_durable.core.inputs import configurable
from langgraph_durable.core.keys import ThreadKeys
from langgraph_durable.core.ops import Emit, Plan, Script
from langgraph_durable.core.records import (
    LIST_PAGE,
    MALFORMED,
    DamagedCheckpoint,
    DecodedCheckpoint,
    as_text,
    thread_id_of,
)

logger = logging.getLogger("langgraph_durable")


def list_checkpoints(
    ctx: PlanContext,
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
        thread_ids = yield from reads.all_thread_ids(ctx)
        for thread_id in thread_ids:
            yield from _list_thread(
                ctx, thread_id, None, None, filter, before_id, remaining, learn=False
            )
            if remaining[0] is not None and remaining[0] <= 0:
                return
        return
    conf = configurable(config, any_namespace=True)
    # refresh_on_read (one thread's history, not an operator's walk of every thread)
    yield from reads.refresh_ttl(ctx, ctx.keys.thread(thread_id_of(conf)))
    yield from _list_thread(
        ctx,
        thread_id_of(conf),
        conf.get("checkpoint_ns"),
        conf.get("checkpoint_id"),
        filter,
        before_id,
        remaining,
    )


def _list_thread(
    ctx: PlanContext,
    thread_id: str,
    ns: str | None,
    checkpoint_id: str | None,
    filter: dict[str, Any] | None,
    before_id: str | None,
    remaining: list[int | None],
    learn: bool = True,
) -> Plan[None]:
    """List one thread. With ``learn`` (not for an operator's walk of every thread,
    which would crowd out what live runs rely on), pages guess their values from, and
    teach, what the saver remembers (``recent.py``, ``newest.py``)."""
    tk = ctx.keys.thread(thread_id)

    def wanted(d: DecodedCheckpoint) -> bool:
        return not filter or all(d.metadata.get(k) == v for k, v in filter.items())

    def page_size() -> int:
        left = remaining[0]
        return LIST_PAGE if filter or left is None else max(1, min(LIST_PAGE, left))

    if ctx.newest_only:
        yield from _list_newest_only(ctx, tk, ns, checkpoint_id, filter, before_id, remaining)
        return
    if not checkpoint_id:
        # Walk the sorted index newest first, a page per round trip: one namespace's
        # range, or every namespace's in timeline order (the read script merges them).
        cursor: Any = before_id
        # The id a page starts below, whose values are guessed (not with a filter:
        # which checkpoints it keeps is not known before they are read).
        below, guessing = before_id, learn and not filter
        # The first result of a walk from the top is the newest of its namespace.
        from_top = guessing and before_id is None
        if ns is None and before_id:
            cursor = ctx.keys.timeline_cursor(before_id)
        while True:
            size = page_size()
            if ns is None:
                args = ["all", cursor or "", size]
            else:
                upper, lower = ctx.keys.namespace_range(ns, cursor)
                args = ["range", upper, lower, size]
            # The values of the checkpoints this saver last wrote or read there, in
            # the same round trip (a wrong guess costs the round trip it saves).
            guess = (
                ctx.recent_fields.fields(
                    thread_id,
                    ns,
                    below=below,
                    newest=ctx.newest_versions.newest_id(thread_id, ns) if from_top else None,
                    count=size,
                )
                if guessing
                else ()
            )
            results, fetched = yield from reads.read(
                ctx, tk, args, wanted, guess=guess, remember=from_top, recall=learn
            )
            from_top = False
            for result in results:
                if (yield from _emit(tk, result, remaining)):
                    return
            if len(fetched) < size:
                return
            cursor = fetched[-1]
            below = cursor if ns is not None else ctx.keys.timeline_id(cursor)
            guessing = guessing and below is not None
    # One checkpoint id (in any namespace): read the index, newest first by id.
    chosen: list[tuple[str, str, str]] = []
    for m_id, m_ns, member in (yield from _index_members(ctx, tk)):
        if ns is not None and m_ns != ns:
            continue
        if checkpoint_id and m_id != checkpoint_id:
            continue
        if before_id and m_id >= before_id:
            continue
        chosen.append((m_id, m_ns, member))
    chosen.sort(reverse=True)  # the order of the walk over every namespace above
    for start in range(0, len(chosen), LIST_PAGE):
        page = [member for _, _, member in chosen[start : start + LIST_PAGE]]
        results, _ = yield from reads.read(ctx, tk, ["members", *page], wanted)
        for result in results:
            if (yield from _emit(tk, result, remaining)):
                return


def _list_newest_only(
    ctx: PlanContext,
    tk: ThreadKeys,
    ns: str | None,
    checkpoint_id: str | None,
    filter: dict[str, Any] | None,
    before_id: str | None,
    remaining: list[int | None],
) -> Plan[None]:
    """A shallow saver's list of a thread: the one checkpoint of each namespace (or
    of ``ns``) that matches, newest first."""
    if ns is None:
        members = yield from _index_members(ctx, tk)
        namespaces = sorted({m_ns for _, m_ns, _ in members})
    else:
        namespaces = [ns]
    found: list[CheckpointTuple] = []
    for namespace in namespaces:
        newest = yield from fallback.newest_only_tuple(ctx, tk.thread_id, namespace)
        if newest is None:
            continue
        newest_id = newest.checkpoint["id"]
        if checkpoint_id and newest_id != checkpoint_id:
            continue
        if before_id and newest_id >= before_id:
            continue
        if not filter or all(newest.metadata.get(k) == v for k, v in filter.items()):
            found.append(newest)
    found.sort(key=lambda t: t.checkpoint["id"], reverse=True)
    for result in found:
        if (yield from _emit(tk, result, remaining)):
            return


def _index_members(ctx: PlanContext, tk: ThreadKeys) -> Plan[list[tuple[str, str, str]]]:
    """Every checkpoint of the thread's index: (id, namespace, member), malformed
    members skipped; an index lacking records is rebuilt first (``reindex.lua``)."""
    wrongtype, members, unindexed = yield Script("read_index", tk.all(), [])
    values.log_wrongtype(tk, wrongtype)
    if unindexed and (yield from reads.reindex(ctx, tk, unindexed)):
        _, members, _ = yield Script("read_index", tk.all(), [])
    parsed: list[tuple[str, str, str]] = []
    for raw in members:
        try:
            member = as_text(raw)
            m_ns, m_id = ctx.keys.parse_checkpoint_member(member)
        except ValueError:
            logger.warning("langgraph-durable: skipped a %s %r", MALFORMED, raw)
            continue
        parsed.append((m_id, m_ns, member))
    return parsed


def _emit(
    tk: ThreadKeys,
    result: CheckpointTuple | DamagedCheckpoint,
    remaining: list[int | None],
) -> Plan[bool]:
    """Emit one listed checkpoint; True when the limit is reached."""
    if isinstance(result, DamagedCheckpoint):
        reads.log_damage(tk, result, level=logging.WARNING)
        yield reads.damage_note(result)
        return False
    yield Emit(result)
    if remaining[0] is not None:
        remaining[0] -= 1
        return remaining[0] <= 0
    return False
