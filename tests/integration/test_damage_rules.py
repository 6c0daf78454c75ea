"""A damage rule for every key type of the storage layout (keys.py).

One real thread holds every key kind: a compiled LangGraph graph with a message list
(whose elements go to ``el``), a subgraph (``sub``), a ``ToolLedger`` tool node (``lg``,
``lgx``), a run id per invoke (``runs``, the ``P:run:{R}`` index sets, ``P:run-index``),
leases (``lease``, ``fence``) and quarantined records (``qt``). It is built once per
module, every key DUMPed after the first invoke (the "older copy") and after the second
(the thread every case starts from, RESTOREd before each case). Kinds only a signed
thread has (``SIGNED_ONLY``: the signed ``head``) are damaged in the same thread written
with ``signing_key``.

Every case damages one key kind one way (a bit flip, garbage, the wrong Redis type, a
deletion, an older copy) and runs one operation with a fresh saver (no in-process
cache): reads, the graph's get_state and a continued run, put_writes, copy_thread,
delete_thread, verify, prune, delete_for_runs, the ToolLedger's entries, the async
saver; for the lease and fence, with a worker holding the thread, renew, release, and
another worker's acquire and write. The operation may:
  * read exactly what the graph wrote under each checkpoint id (``intact``),
  * fall back (an older checkpoint, fewer checkpoints, writes or ledger entries, none)
    and say so: ``recovery_report``, a damaged ledger entry, or a warning logged by
    ``langgraph_durable`` (``fallback``),
  * raise a typed ``DurableError`` (``typed``); reads that name no checkpoint never do,
and never raise anything else (``RawError``: a raw Redis error, a KeyError...) nor
return what was not written, lose data without a word or acknowledge what it did not
do (``WrongRead``). A write must read back in a fresh process.

``RULES`` names, for every key kind and damage, the worst of those outcomes any
operation may have, and the operations that fail today as strict xfails that only
their own failure satisfies. A key kind added to the layout without a rule fails
``test_every_key_kind_has_a_rule`` and each of its cases.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import copy
import logging
import random
import re
import traceback
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from importlib.resources import files
from typing import Annotated, Any
from unittest import mock

import pytest
import redis
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.base import CheckpointTuple
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from typing_extensions import TypedDict

from langgraph_durable import (
    AsyncRedisSaver,
    DurableError,
    LeaseHeldError,
    RedisSaver,
    ToolLedger,
    UnreadableThreadError,
    VerifyReport,
)
from langgraph_durable.core.keys import LEASE_KEY_KINDS, THREAD_KEY_KINDS, KeySchema
from langgraph_durable.core.repair import repair
from langgraph_durable.io import scripts
from langgraph_durable.ledger import DAMAGED, LedgerEntry
from tests.helpers.graphs import prose
from tests.helpers.redis_keys import delete_prefix, flipped

THREAD = "damaged-thread"
COPY = "damaged-copy"
RUN_1, RUN_2, RUN_3 = "run-1", "run-2", "run-3"
LAYOUT_KINDS = (*THREAD_KEY_KINDS, *LEASE_KEY_KINDS, "run", "run-index")
# Kinds a thread has only when written with signing_key: damaged in a signed thread.
SIGNED_ONLY = frozenset({"head"})
SIGNING_KEY = b"damage-rules-signing-key-0123456"
DAMAGES = ("bit flip", "garbage", "wrong type", "deletion", "older copy")

INTACT, FALLBACK, TYPED = "intact", "fallback", "typed"
_RANK = {INTACT: 0, FALLBACK: 1, TYPED: 2}


class WrongRead(AssertionError):
    """Data that differs from what was written, data lost without a word, or an
    operation that did not do what it acknowledged."""


class RawError(AssertionError):
    """An exception that is no ``DurableError`` got out (a raw Redis error, a KeyError...)."""


@dataclass(frozen=True)
class Rule:
    """The worst outcome any operation may have after this damage (intact < fallback <
    typed), and the operations that fail today: operation -> (the failure, what fails),
    each a strict xfail that only that failure satisfies."""

    worst: str
    xfail: dict[str, tuple[type[AssertionError], str]] = field(default_factory=dict)


def wrong(reason: str) -> tuple[type[AssertionError], str]:
    """Fails today with a wrong or silently incomplete result."""
    return WrongRead, reason


def rules(
    bit_flip: Rule, garbage: Rule, wrong_type: Rule, deletion: Rule, older_copy: Rule
) -> dict[str, Rule]:
    return dict(zip(DAMAGES, (bit_flip, garbage, wrong_type, deletion, older_copy), strict=True))


def every(worst: str) -> dict[str, Rule]:
    return {damage: Rule(worst) for damage in DAMAGES}


I, F, T = Rule(INTACT), Rule(FALLBACK), Rule(TYPED)

# With P:run-index set, delete_for_runs visits the threads the run's set names (a set
# naming a thread the run left nothing in makes it search every thread). A set deleted,
# or put back as it was before it named a thread, is not told from a run that wrote
# nothing there: a SCAN per rollback would be the price (docs/operations/security.md: who
# can write to your Redis).
_RUN_SET = wrong(
    "delete_for_runs visits only the threads P:run:{R} names once P:run-index is set: a "
    "set deleted or put back older keeps the run's checkpoints in a thread it lacks"
)


# -- the rules ------------------------------------------------------------------------
RULES: dict[str, dict[str, Rule]] = {
    # checkpoint index: a record outside the index is put back into it
    "cps": rules(F, I, F, I, I),
    # write index
    "wix": rules(I, I, F, I, I),
    # checkpoint records: reads fall back, a named read raises CheckpointCorruptedError;
    # copy_thread leaves out what the index names without a record, and says so
    "cp": rules(T, T, F, T, T),
    # pending-write records: dropped with a report (the task runs again)
    "wr": rules(F, F, F, F, F),
    # channel values: reads fall back, a named read raises CheckpointCorruptedError
    "bl": every(TYPED),
    # checkpoint -> run id, for delete_for_runs: the checkpoints' own metadata decides
    "runs": every(INTACT),
    # quarantine: forensics only, never read back
    "qt": every(INTACT),
    # ledger records: one that does not verify reads as damaged (an unknown outcome)
    "lg": rules(F, F, T, F, F),
    # ledger index
    "lgx": rules(F, I, T, I, I),
    # subgraph timeline
    "sub": rules(F, I, I, I, I),
    # elements of message lists: what names a damaged one falls back
    "el": every(TYPED),
    # write generation: the next write starts it again
    "gen": every(INTACT),
    # the lease a worker holds: others are refused (LeaseHeldError), the holder goes on;
    # one of the wrong type is deleted by the next lease call (the fence still fences)
    "lease": rules(T, T, T, I, T),
    # the fence: a damaged one refuses the holder's writes (LeaseLostError)
    "fence": every(TYPED),
    # a run's index set P:run:{R}
    "run": rules(
        I,
        I,
        I,
        Rule(INTACT, {"delete_for_runs": _RUN_SET}),
        Rule(INTACT, {"delete_for_runs": _RUN_SET}),
    ),
    # P:run-index: a fresh saver's setup indexes the prefix again
    "run-index": every(INTACT),
    # signed heads (signing_key only): a lower bound on the newest checkpoint; damaged,
    # nothing is read wrong (damaged in the signed thread, see SIGNED_ONLY)
    "head": every(INTACT),
}


# -- the graph --------------------------------------------------------------------------
class State(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]
    summary: str


@tool
def lookup(query: str) -> str:
    """Look a query up (deterministic)."""
    return f"result for {query}"


def _agent(state: State) -> dict[str, Any]:
    """One tool call per human message, then an answer."""
    humans = sum(isinstance(m, HumanMessage) for m in state["messages"])
    tools = sum(isinstance(m, ToolMessage) for m in state["messages"])
    n = humans - 1
    if tools < humans:
        call = {"name": "lookup", "args": {"query": f"q{n}"}, "id": f"call_{n}"}
        return {"messages": [AIMessage(content=prose(300, n), id=f"ai-{n}", tool_calls=[call])]}
    return {"messages": [AIMessage(content=f"answer {n}", id=f"final-{n}")]}


def _route(state: State) -> str:
    last = state["messages"][-1]
    return "tools" if isinstance(last, AIMessage) and last.tool_calls else "summarize"


def build_graph(saver: Any) -> Any:
    """agent <-> tools (through the ToolLedger), then a subgraph that writes a summary."""
    inner = StateGraph(State)
    inner.add_node("count", lambda s: {"summary": f"{len(s['messages'])} messages"})
    inner.add_edge(START, "count")
    inner.add_edge("count", END)
    builder = StateGraph(State)
    builder.add_node("agent", _agent)
    builder.add_node("tools", ledger_of(saver).tool_node([lookup]))
    builder.add_node("summarize", inner.compile())
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", _route, ["tools", "summarize"])
    builder.add_edge("tools", "agent")
    builder.add_edge("summarize", END)
    return builder.compile(checkpointer=saver)


def ledger_of(saver: Any) -> ToolLedger:
    return ToolLedger(saver, policies={"lookup": "retry"})


def cfg(thread_id: str = THREAD, run_id: str | None = None, **more: Any) -> dict[str, Any]:
    conf: dict[str, Any] = {"thread_id": thread_id, **more}
    if run_id:
        conf["run_id"] = run_id
    return {"configurable": conf}


def human(n: int) -> dict[str, Any]:
    return {"messages": [HumanMessage(content=f"question {n}", id=f"human-{n}")]}


def live_values(graph: Any, saver: Any, tup: CheckpointTuple) -> dict[str, Any]:
    """What ``graph.get_state`` shows when ``tup`` is the thread's newest checkpoint: its
    values with the writes of its finished tasks applied (LangGraph's live snapshot)."""
    tup = copy.deepcopy(tup)  # LangGraph applies the writes to the checkpoint it is given
    return graph._prepare_state_snapshot(tup.config, tup, saver=saver, live=True).values  # type: ignore[no-any-return]


def same_values(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Graph values equal, but for the ids add_messages draws at random for a message
    stored without one (a ToolMessage in a pending write gets a new id each time the
    write is applied)."""
    if a.keys() != b.keys():
        return False
    return all(same_messages(a[k], b[k]) if k == "messages" else a[k] == b[k] for k in a)


def same_messages(a: list[Any], b: list[Any]) -> bool:
    def unidentified(m: Any) -> Any:
        return m.model_copy(update={"id": None}) if isinstance(m, ToolMessage) else m

    return len(a) == len(b) and all(
        x == y or unidentified(x) == unidentified(y) for x, y in zip(a, b, strict=True)
    )


# -- the thread, its truth and its dumps ---------------------------------------------------
@dataclass
class Truth:
    """What the graph wrote, read back before any damage."""

    checkpoints: dict[tuple[str, str], CheckpointTuple]  # (ns, id) -> tuple
    newest: dict[str, str]  # ns -> newest checkpoint id
    states: dict[str, dict[str, Any]]  # root checkpoint id -> get_state values, were it newest
    plain: dict[str, dict[str, Any]]  # the same without its pending writes (dropped ones)
    entries: dict[str, LedgerEntry]  # ledger field -> entry
    run_of: dict[str, Any]  # checkpoint id -> run id


Dumps = dict[bytes, tuple[bytes, int]]  # key -> (DUMP, ttl in ms, 0 for none)


@dataclass
class World:
    url: str
    prefix: str
    client: redis.Redis
    keys: KeySchema
    older: Dumps = field(default_factory=dict)  # after the first invoke
    current: Dumps = field(default_factory=dict)  # after the second: every case starts here
    truth: Truth | None = None
    options: dict[str, Any] = field(default_factory=dict)  # of every saver on it

    def dump(self) -> Dumps:
        out: Dumps = {}
        for key in self.client.scan_iter(match=f"{self.prefix}:*", count=1000):
            out[key] = (self.client.dump(key), max(self.client.pttl(key), 0))
        return out

    def restore(self) -> None:
        delete_prefix(self.client, self.prefix)
        pipe = self.client.pipeline(transaction=False)
        for key, (data, ttl) in self.current.items():
            pipe.restore(key, ttl, data, replace=True)
        pipe.execute()

    @contextlib.contextmanager
    def saver(self, **options: Any) -> Iterator[RedisSaver]:
        options = {**self.options, **options}
        with RedisSaver.from_conn_string(self.url, key_prefix=self.prefix, **options) as s:
            yield s

    @contextlib.asynccontextmanager
    async def asaver(self) -> Any:
        async with AsyncRedisSaver.from_conn_string(
            self.url, key_prefix=self.prefix, **self.options
        ) as s:
            yield s

    def key_of(self, kind: str) -> str:
        if kind == "run":
            return self.keys.run(RUN_2)
        if kind == "run-index":
            return self.keys.run_index_marker()
        return getattr(self.keys.thread(THREAD), kind)  # type: ignore[no-any-return]


def _junk_into_quarantine(saver: RedisSaver, client: redis.Redis, task: str) -> None:
    """A pending write whose record is cut short, moved to ``qt`` by a repair."""
    oldest = list(saver.list(cfg()))[-1]
    saver.put_writes(oldest.config, [("summary", task)], task_id=task)
    tk = saver.keys.thread(THREAD)
    member = next(m for m in client.zrange(tk.wix, 0, -1) if task.encode() in m)
    # truncated: a bit flip in a signed record is a bad signature, which repair leaves
    client.hset(tk.wr, member, client.hget(tk.wr, member)[:3])
    assert saver.drive(repair(saver.core, THREAD)).moved


@pytest.fixture(scope="module")
def world(redis_url: str) -> Iterator[World]:
    """The thread, unsigned (the default)."""
    yield from _world(redis_url)


@pytest.fixture(scope="module")
def signed_world(redis_url: str) -> Iterator[World]:
    """The thread written with ``signing_key``: for the kinds only signed threads have."""
    yield from _world(redis_url, signing_key=SIGNING_KEY)


def world_for(request: pytest.FixtureRequest, kind: str) -> World:
    fixture = "signed_world" if kind in SIGNED_ONLY else "world"
    return request.getfixturevalue(fixture)  # type: ignore[no-any-return]


def _world(redis_url: str, **options: Any) -> Iterator[World]:
    client = redis.Redis.from_url(redis_url)
    prefix = f"lgdtest-{uuid.uuid4().hex[:12]}"
    w = World(redis_url, prefix, client, KeySchema(prefix), options=options)
    try:
        with w.saver() as saver:
            graph = build_graph(saver)
            with saver.lease(THREAD, ttl=120):
                graph.invoke(human(0), cfg(run_id=RUN_1))
                _junk_into_quarantine(saver, client, "junk-0")
                w.older = w.dump()  # with the first lease held: an older copy of it too
            with saver.lease(THREAD, ttl=120):  # a newer fencing token
                graph.invoke(human(1), cfg(run_id=RUN_2))
            _junk_into_quarantine(saver, client, "junk-1")
        w.current = w.dump()
        with w.saver() as reader:
            graph = build_graph(reader)
            tuples = list(reader.list(cfg()))
            root = [t for t in tuples if not t.config["configurable"]["checkpoint_ns"]]
            newest: dict[str, str] = {}
            for t in tuples:  # newest first within each namespace
                newest.setdefault(t.config["configurable"]["checkpoint_ns"], t.checkpoint["id"])
            w.truth = Truth(
                checkpoints={
                    (t.config["configurable"]["checkpoint_ns"], t.checkpoint["id"]): t
                    for t in tuples
                },
                newest=newest,
                states={t.checkpoint["id"]: live_values(graph, reader, t) for t in root},
                plain={
                    t.checkpoint["id"]: live_values(graph, reader, t._replace(pending_writes=[]))
                    for t in root
                },
                entries={e.field: e for e in ledger_of(reader).entries(THREAD)},
                run_of={t.checkpoint["id"]: t.metadata.get("run_id") for t in tuples},
            )
            assert not reader.verify(THREAD).findings
        yield w
    finally:
        delete_prefix(client, prefix)
        client.close()


# -- the damage ---------------------------------------------------------------------------
def _garbage(kind: str, damage: str) -> bytes:
    return random.Random(f"{kind}/{damage}").randbytes(48)


def _target_field(w: World, kind: str) -> bytes:
    """The hash field or index member a damage hits: the newest thing of its kind."""
    truth, tk, client = w.truth, w.keys.thread(THREAD), w.client
    assert truth is not None
    newest_member = w.keys.checkpoint_member("", truth.newest[""]).encode()
    if kind in ("cp", "cps", "runs"):
        return newest_member
    if kind in ("wix", "wr"):  # the newest write of the root namespace
        return max(m for m in client.zrange(tk.wix, 0, -1) if m.startswith(b"\x00"))
    if kind == "bl":
        version = truth.checkpoints[("", truth.newest[""])].checkpoint["channel_versions"]
        return w.keys.blob_field("", "messages", version["messages"]).encode()
    if kind in ("lg", "lgx"):
        return max(client.zrange(tk.lgx, 0, -1))
    if kind == "sub":
        return max(client.zrange(tk.sub, 0, -1))
    if kind == "el":  # an element the newest messages value names
        manifest = client.hget(tk.bl, _target_field(w, "bl")) or b""
        return min(d for d in client.hkeys(tk.el) if d in manifest)
    key = w.key_of(kind)
    if client.type(key) == b"zset":  # a kind without a choice of its own: the newest
        return max(client.zrange(key, 0, -1))  # type: ignore[no-any-return]
    return min(client.hkeys(key))  # type: ignore[no-any-return]  # qt, head: the first


def apply_damage(w: World, kind: str, damage: str) -> None:
    client, key = w.client, w.key_of(kind)
    kind_type = client.type(key).decode()
    assert kind_type != "none", f"{kind}: {key!r} does not exist to damage"
    if damage == "deletion":
        client.delete(key)
    elif damage == "older copy":
        client.delete(key)
        if key.encode() in w.older:
            data, ttl = w.older[key.encode()]
            client.restore(key, ttl, data, replace=True)
    elif damage == "wrong type":
        client.delete(key)
        if kind_type == "string":
            client.hset(key, "field", b"a hash where a string belongs")
        else:
            client.set(key, f"a string where a {kind_type} belongs")
    elif kind_type == "string":
        value = client.get(key)
        bad = flipped(value, len(value) // 2) if damage == "bit flip" else _garbage(kind, damage)
        client.set(key, bad, keepttl=True)
    elif kind_type == "hash":
        target = _target_field(w, kind)
        value = client.hget(key, target)
        bad = flipped(value, len(value) // 2) if damage == "bit flip" else _garbage(kind, damage)
        client.hset(key, target, bad)
    elif kind_type in ("zset", "set"):
        zset = kind_type == "zset"
        target = _target_field(w, kind) if zset else min(client.smembers(key))
        if damage == "bit flip":  # the member itself: its last byte
            (client.zrem if zset else client.srem)(key, target)
        member = flipped(target) if damage == "bit flip" else _garbage(kind, damage)
        if zset:
            client.zadd(key, {member: 0})
        else:  # a garbage member beside the others
            client.sadd(key, member)
    else:
        raise AssertionError(f"{kind}: no damage for a {kind_type}")


# -- judging outcomes ---------------------------------------------------------------------
@dataclass
class Judge:
    """Checks what an operation returned against the truth; keeps the worst outcome."""

    world: World
    caplog: pytest.LogCaptureFixture
    outcome: str = INTACT
    notes: list[str] = field(default_factory=list)

    @property
    def truth(self) -> Truth:
        assert self.world.truth is not None
        return self.world.truth

    def warned(self) -> bool:
        return any(
            r.levelno >= logging.WARNING
            and r.name.startswith("langgraph_durable")
            and r.module not in ("hazards", "connect", "lease")
            for r in self.caplog.records
        )

    def fell_back(self, saver: Any, what: str, ns: str = "", thread: str = THREAD) -> None:
        """Acceptable only when reported (a recovery report or a logged warning)."""
        if saver.recovery_report(thread, ns) is None and not self.warned():
            raise WrongRead(f"silent: {what}")
        self.notes.append(what)
        self.raise_to(FALLBACK)

    def raise_to(self, outcome: str) -> None:
        if _RANK[outcome] > _RANK[self.outcome]:
            self.outcome = outcome

    def tuple_(
        self,
        saver: Any,
        tup: CheckpointTuple | None,
        *,
        named: str | None = None,
        ns: str = "",
        thread: str = THREAD,
        extra_writes: tuple[tuple[str, str, Any], ...] = (),
    ) -> None:
        """``tup`` is exactly the checkpoint written under its id (named, or the newest of
        ``ns``), else a reported fallback."""
        if tup is None:
            self.fell_back(saver, f"no checkpoint read ({named or 'newest'})", ns, thread)
            return
        conf = tup.config["configurable"]
        key = (conf["checkpoint_ns"], tup.checkpoint["id"])
        want = self.truth.checkpoints.get(key)
        if want is None:
            raise WrongRead(f"read a checkpoint never written: {key}")
        if tup.checkpoint != want.checkpoint:
            raise WrongRead(f"checkpoint {key} differs from what was written")
        if tup.metadata != want.metadata:
            raise WrongRead(f"metadata of {key} differs: {tup.metadata} != {want.metadata}")
        parent = (tup.parent_config or {}).get("configurable", {}).get("checkpoint_id")
        if parent != (want.parent_config or {}).get("configurable", {}).get("checkpoint_id"):
            raise WrongRead(f"parent of {key} differs")
        written = list(want.pending_writes or []) + list(extra_writes)
        read = list(tup.pending_writes or [])
        if any(wr not in written for wr in read):
            raise WrongRead(f"a pending write of {key} never written: {read} vs {written}")
        if any(wr not in read for wr in written):
            self.fell_back(saver, f"pending writes of {key} missing", key[0], thread)
        if named is None and key[1] != self.truth.newest[key[0]]:
            self.fell_back(saver, f"older checkpoint {key} read as the newest", ns, thread)

    def listing(self, saver: Any, tuples: list[CheckpointTuple], thread: str = THREAD) -> None:
        for t in tuples:
            self.tuple_(saver, t, named=t.checkpoint["id"], thread=thread)
        got = [(t.config["configurable"]["checkpoint_ns"], t.checkpoint["id"]) for t in tuples]
        if len(set(got)) != len(got):
            raise WrongRead("a checkpoint listed twice")
        missing = set(self.truth.checkpoints) - set(got)
        if missing:
            self.fell_back(saver, f"{len(missing)} checkpoints not listed", thread=thread)

    def entries(self, entries: list[LedgerEntry]) -> None:
        seen = set()
        for e in entries:
            want = self.truth.entries.get(e.field)
            if e.state == DAMAGED:  # reported: an unknown outcome, never a missing one
                self.raise_to(FALLBACK)
            elif want is None:
                raise WrongRead(f"a ledger entry never written: {e.field!r} {e.state}")
            elif e != want:
                raise WrongRead(f"ledger entry {e.field!r} differs: {e} != {want}")
            seen.add(e.field)
        if set(self.truth.entries) - seen:
            # reported: a damaged entry in their place, or a warning
            if not self.warned() and all(e.state != DAMAGED for e in entries):
                raise WrongRead("silent: ledger entries missing")
            self.raise_to(FALLBACK)


# -- the operations -------------------------------------------------------------------------
def op_get_tuple(w: World, j: Judge) -> None:
    with w.saver() as s:
        j.tuple_(s, s.get_tuple(cfg()))


def op_get_tuple_id(w: World, j: Judge) -> None:
    assert w.truth is not None
    newest = w.truth.newest[""]
    with w.saver() as s:
        j.tuple_(s, s.get_tuple(cfg(checkpoint_ns="", checkpoint_id=newest)), named=newest)


def op_list(w: World, j: Judge) -> None:
    with w.saver() as s:
        j.listing(s, list(s.list(cfg())))


def op_get_state(w: World, j: Judge) -> None:
    with w.saver() as s:
        graph = build_graph(s)
        read: list[CheckpointTuple | None] = []
        get_tuple = RedisSaver.get_tuple

        def recorded(self: RedisSaver, config: Any) -> CheckpointTuple | None:
            tup = get_tuple(self, config)
            read.append(copy.deepcopy(tup))  # LangGraph applies writes to what it is given
            return tup

        # on the class: LangGraph reads through a clone of the saver (with_allowlist)
        with mock.patch.object(RedisSaver, "get_tuple", recorded):
            snap = graph.get_state(cfg())
        # the checkpoint it read, checked as get_tuple's; its values as LangGraph shows them
        j.tuple_(s, read[0])
        if read[0] is not None and not same_values(snap.values, live_values(graph, s, read[0])):
            raise WrongRead(f"get_state values of {read[0].checkpoint['id']} differ")


def _check_continued(w: World, j: Judge, saver: Any, result: dict[str, Any], run: str) -> None:
    """A run that continued the thread built on what was written and reads back."""
    assert w.truth is not None
    with w.saver() as reader:
        ours = [t for t in reader.list(cfg(checkpoint_ns="")) if t.metadata.get("run_id") == run]
        if not ours:
            raise WrongRead("an acknowledged run's checkpoints do not read back")
        first = ours[-1]
        parent = (first.parent_config or {}).get("configurable", {}).get("checkpoint_id")
        if parent is None:
            j.fell_back(saver, "the run started the thread over")
        else:
            if parent not in w.truth.states:
                raise WrongRead(f"the run built on a checkpoint never written: {parent}")

            def continues(values: dict[str, Any]) -> bool:
                before = values.get("messages", [])
                return same_messages(result["messages"][: len(before)], before)

            if not continues(w.truth.states[parent]):
                if not continues(w.truth.plain[parent]):
                    raise WrongRead("the run's messages do not continue its parent's")
                j.fell_back(saver, f"the run dropped pending writes of {parent}")
            if parent != w.truth.newest[""]:
                j.fell_back(saver, f"the run built on an older checkpoint {parent}")
        back = build_graph(reader).get_state(cfg()).values
        if not same_values(back, result):
            raise WrongRead("an acknowledged run does not read back in a fresh process")


def op_put(w: World, j: Judge) -> None:
    with w.saver() as s:
        result = build_graph(s).invoke(human(2), cfg(run_id=RUN_3))
        _check_continued(w, j, s, result, RUN_3)


def op_put_writes(w: World, j: Judge) -> None:
    assert w.truth is not None
    newest = w.truth.newest[""]
    named = cfg(checkpoint_ns="", checkpoint_id=newest)
    with w.saver() as s:
        s.put_writes(named, [("summary", "late")], task_id="late-task")
    with w.saver() as reader:
        tup = reader.get_tuple(named)
        j.tuple_(reader, tup, named=newest, extra_writes=(("late-task", "summary", "late"),))
        if tup is not None and ("late-task", "summary", "late") not in tup.pending_writes:
            raise WrongRead("an acknowledged pending write does not read back")


def op_copy_thread(w: World, j: Judge) -> None:
    with w.saver() as s:
        s.copy_thread(THREAD, COPY)
    with w.saver() as reader:
        j.listing(reader, list(reader.list(cfg(COPY))), thread=COPY)
        copied = ledger_of(reader).entries(COPY)
    assert w.truth is not None
    for e in copied:
        want = w.truth.entries.get(e.field)
        if e.state != DAMAGED and (want is None or e.result != want.result):
            raise WrongRead(f"copied ledger entry {e.field!r} differs")


def op_delete_thread(w: World, j: Judge) -> None:
    with w.saver() as s:
        s.delete_thread(THREAD)
    tk = w.keys.thread(THREAD)
    left = [k for k in tk.with_twins() if w.client.exists(k)]
    if left:
        raise WrongRead(f"delete_thread left keys: {left}")


def op_verify(w: World, j: Judge) -> None:
    with w.saver() as s:
        report = s.verify(THREAD)
    assert isinstance(report, VerifyReport)
    if report.findings:
        j.notes.append(f"verify: {len(report.findings)} findings")


def op_prune(w: World, j: Judge) -> None:
    with w.saver() as s:
        s.prune([THREAD], keep_last=1)
    with w.saver() as reader:
        j.tuple_(reader, reader.get_tuple(cfg()))


def op_delete_for_runs(w: World, j: Judge) -> None:
    assert w.truth is not None
    with w.saver() as s:
        s.delete_for_runs([RUN_2])
    with w.saver() as reader:
        left = list(reader.list(cfg()))
    for t in left:
        j.tuple_(reader, t, named=t.checkpoint["id"])
        if t.metadata.get("run_id") == RUN_2:
            said = "a warning was logged" if j.warned() else "nothing logged"
            raise WrongRead(
                f"delete_for_runs left checkpoint {t.checkpoint['id']} of the run ({said})"
            )
    kept = {t.checkpoint["id"] for t in left}
    missing = {cid for cid, run in w.truth.run_of.items() if run == RUN_1} - kept
    if missing:
        j.fell_back(reader, f"delete_for_runs: {len(missing)} checkpoints of another run gone")


def op_ledger_entries(w: World, j: Judge) -> None:
    with w.saver() as s:
        j.entries(ledger_of(s).entries(THREAD))


def op_aget_tuple(w: World, j: Judge) -> None:
    async def run() -> None:
        async with w.asaver() as s:
            j.tuple_(s, await s.aget_tuple(cfg()))

    asyncio.run(run())


def op_aput(w: World, j: Judge) -> None:
    async def run() -> tuple[Any, dict[str, Any]]:
        async with w.asaver() as s:
            result = await build_graph(s).ainvoke(human(2), cfg(run_id=RUN_3))
            return s.recovery_report(THREAD), result

    report, result = asyncio.run(run())

    class _Reported:  # the async saver is closed: carry its report
        def recovery_report(self, thread_id: str, ns: str = "") -> Any:
            return report

    _check_continued(w, j, _Reported(), result, RUN_3)


# Lease operations: a worker holds the thread (its token bound in this context) when the
# lease or fence key is damaged.
def op_renew(w: World, j: Judge, held: Any) -> None:
    with w.saver() as s:
        assert isinstance(s.drive(s.core.renew_lease(held)), bool)


def op_release(w: World, j: Judge, held: Any) -> None:
    with w.saver() as s:
        assert isinstance(s.drive(s.core.release_lease(held)), bool)


def op_acquire(w: World, j: Judge, held: Any) -> None:
    """Another worker: refused while the holder's lease stands, else a newer token."""

    def elsewhere() -> None:
        with w.saver() as s, s.lease(THREAD, ttl=30) as lease:
            if int(lease.token) <= int(held.token):
                raise WrongRead(f"token {lease.token} handed out after {held.token}")

    try:
        contextvars.Context().run(elsewhere)
    except LeaseHeldError as exc:
        j.notes.append(f"LeaseHeldError: {exc}")
        j.raise_to(TYPED)


def op_other_put(w: World, j: Judge, held: Any) -> None:
    """Another worker writes without a lease: refused while the holder's lease stands."""

    def elsewhere() -> None:
        with w.saver() as s:
            result = build_graph(s).invoke(human(2), cfg(run_id=RUN_3))
            _check_continued(w, j, s, result, RUN_3)

    contextvars.Context().run(elsewhere)


OPS: dict[str, Callable[[World, Judge], None]] = {
    "get_tuple": op_get_tuple,
    "get_tuple_id": op_get_tuple_id,
    "list": op_list,
    "get_state": op_get_state,
    "put": op_put,
    "put_writes": op_put_writes,
    "copy_thread": op_copy_thread,
    "delete_thread": op_delete_thread,
    "verify": op_verify,
    "prune": op_prune,
    "delete_for_runs": op_delete_for_runs,
    "ledger_entries": op_ledger_entries,
    "aget_tuple": op_aget_tuple,
    "aput": op_aput,
}
LEASE_OPS: dict[str, Callable[[World, Judge, Any], None]] = {
    "renew": op_renew,
    "release": op_release,
    "acquire": op_acquire,
    "other_put": op_other_put,
}


# Reads that name no checkpoint: damage makes them fall back (skipped and reported), never
# raise (get_tuple's contract), unless nothing is readable with this configuration.
FALLBACK_ONLY = frozenset({"get_tuple", "list", "get_state", "ledger_entries", "aget_tuple"})


def ops_of(kind: str) -> list[str]:
    return [*OPS, *(LEASE_OPS if kind in LEASE_KEY_KINDS else ())]


_DRIVERS = ("wire.py", "driver.py", "saver.py", "aio.py", "base.py", "failover.py")


def _origin(exc: BaseException) -> str:
    """Where in langgraph_durable the error comes from: the plan waiting on the call that
    failed (or else the innermost frame that is not a driver), and for a script error
    the Lua file and line."""
    where = _waiting_plan(exc)
    if where is None:
        frames = [
            f
            for f in traceback.extract_tb(exc.__traceback__)
            if "/langgraph_durable/" in f.filename and not f.filename.endswith(_DRIVERS)
        ]
        where = _place(*frames[-1][:3]) if frames else "no langgraph_durable frame"
    found = re.search(r"script: ([0-9a-f]{40}), on @user_script:(\d+)", str(exc))
    if found:
        where += ", " + _lua_line(found.group(1), int(found.group(2)))
    return where


def _place(filename: str, lineno: int | None, name: str) -> str:
    return f"{filename.split('/langgraph_durable/', 1)[-1]}:{lineno} {name}"


def _waiting_plan(exc: BaseException) -> str | None:
    """A driver raises a failed call's error itself (driver.py ``_op_steps``): the plan that
    made the call is the generator its ``_steps`` frame was driving, suspended at the
    ``yield`` of that call."""
    tb = exc.__traceback__
    place = None
    while tb is not None:
        frame = tb.tb_frame
        gen = frame.f_locals.get("plan") if frame.f_code.co_name == "_steps" else None
        while gen is not None and getattr(gen, "gi_frame", None) is not None:
            code = gen.gi_frame.f_code
            place = _place(code.co_filename, gen.gi_frame.f_lineno, code.co_name)
            gen = gen.gi_yieldfrom
        tb = tb.tb_next
    return place


def _lua_line(sha: str, line: int) -> str:
    """``@user_script:N`` of a script as the file and line under ``lua/``."""
    prelude = (files("langgraph_durable") / "lua" / "_prelude.lua").read_text() + "\n"
    for name in scripts.SCRIPT_NAMES:
        for flagged in (False, True):
            if scripts.script_sha(name, flagged) == sha:
                source = scripts.script_source(name, flagged)
                head = source.index(prelude) if prelude in source else 0
                before = source[:head].count("\n")  # the no-writes flag line
                own = before + prelude.count("\n")  # lines ahead of the script's own file
                if line > own:
                    return f"lua/{name}.lua:{line - own}"
                return f"lua/_prelude.lua:{line - before} (in {name})"
    return f"script {sha[:8]} line {line}"


def _cases() -> Iterator[Any]:
    for kind in LAYOUT_KINDS:
        for damage in DAMAGES:
            rule = RULES.get(kind, {}).get(damage)
            for op in ops_of(kind):
                fails = rule.xfail.get(op) if rule else None
                marks = (
                    [pytest.mark.xfail(strict=True, raises=fails[0], reason=fails[1])]
                    if fails
                    else []
                )
                case = f"{kind}-{damage.replace(' ', '_')}-{op}"
                yield pytest.param(kind, damage, op, marks=marks, id=case)


# -- the tests ------------------------------------------------------------------------------
def test_every_key_kind_has_a_rule() -> None:
    assert set(RULES) == set(THREAD_KEY_KINDS) | set(LEASE_KEY_KINDS) | {"run", "run-index"}
    for kind, rules in RULES.items():
        assert set(rules) == set(DAMAGES), kind
        for damage, rule in rules.items():
            assert rule.worst in _RANK, (kind, damage)
            assert set(rule.xfail) <= set(ops_of(kind)), (kind, damage)


@pytest.mark.parametrize("kind", LAYOUT_KINDS)
def test_the_thread_holds_every_key_kind(request: pytest.FixtureRequest, kind: str) -> None:
    """Every damage below hits a key that exists (the lease: while a worker holds it)."""
    w = world_for(request, kind)
    present = {k.decode() for k in w.current} | {k.decode() for k in w.older}
    assert w.key_of(kind) in present, f"the thread holds no {kind!r} key to damage"


def test_the_thread_holds_its_older_lease_and_quarantine(world: World) -> None:
    assert world.keys.thread(THREAD).lease.encode() in world.older
    tk = world.keys.thread(THREAD)
    assert world.client.type(tk.qt) == b"hash"  # quarantine: two damaged writes


@pytest.mark.parametrize("signed", [False, True], ids=["unsigned", "signed"])
@pytest.mark.parametrize("op", list(OPS))
def test_an_undamaged_thread_reads_intact(
    request: pytest.FixtureRequest, op: str, signed: bool, caplog: pytest.LogCaptureFixture
) -> None:
    world: World = request.getfixturevalue("signed_world" if signed else "world")
    world.restore()
    caplog.set_level(logging.WARNING, logger="langgraph_durable")
    judge = Judge(world, caplog)
    OPS[op](world, judge)
    assert judge.outcome == INTACT, judge.notes


@pytest.mark.parametrize(("kind", "damage", "op"), list(_cases()))
def test_damage(
    request: pytest.FixtureRequest,
    kind: str,
    damage: str,
    op: str,
    caplog: pytest.LogCaptureFixture,
    record_property: Callable[[str, object], None],
) -> None:
    rule = RULES.get(kind, {}).get(damage)
    assert rule is not None, f"no damage rule for key kind {kind!r} / {damage!r}"
    world = world_for(request, kind)
    world.restore()
    caplog.set_level(logging.WARNING, logger="langgraph_durable")
    judge = Judge(world, caplog)
    with contextlib.ExitStack() as stack:
        held = None
        if kind in LEASE_KEY_KINDS:  # a worker holds the thread; its writes carry its token
            holder = stack.enter_context(world.saver())
            held = stack.enter_context(holder.lease(THREAD, ttl=60))
        apply_damage(world, kind, damage)
        caplog.clear()
        try:
            if op in OPS:
                OPS[op](world, judge)
            else:
                LEASE_OPS[op](world, judge, held)
        except DurableError as exc:
            judge.notes.append(f"{type(exc).__name__}: {exc}")
            if op in FALLBACK_ONLY and not isinstance(exc, UnreadableThreadError):
                raise WrongRead(
                    f"{op} raised {type(exc).__name__} ({exc}): a read that names no "
                    f"checkpoint falls back, it does not raise [{_origin(exc)}]"
                ) from exc
            judge.raise_to(TYPED)
        except AssertionError:
            raise
        except Exception as exc:
            name = f"{type(exc).__module__}.{type(exc).__name__}"
            raise RawError(f"raw {name}: {exc} [{_origin(exc)}]") from exc
    record_property("outcome", judge.outcome)
    record_property("notes", " | ".join(judge.notes)[:300])
    assert _RANK[judge.outcome] <= _RANK[rule.worst], (
        f"{judge.outcome} where the rule allows {rule.worst}: {judge.notes}"
    )
