"""Redis hazards are detected, never silently wrong: an eviction policy that can drop the
saver's keys, partial loss of a thread's keys (ledger halves, a checkpoint index without
records, a parent checkpoint gone), Lua's ``unpack`` limit, refused writes that leave
values behind, and keys created without the thread's TTL.

Every test runs on private redis-servers of its own (FLUSHDB and CONFIG SET included)."""

from __future__ import annotations

import contextvars
import logging
import operator
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated, Any

import pytest
import redis
import redis.cluster
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.base import Checkpoint, copy_checkpoint, empty_checkpoint
from langgraph.checkpoint.base.id import uuid6
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, Send, interrupt
from typing_extensions import TypedDict

from langgraph_durable import (
    AsyncRedisSaver,
    CheckpointCorruptedError,
    CheckpointLostError,
    LeaseHeldError,
    LeaseLostError,
    RedisSaver,
    ToolLedger,
    ToolOutcomeUnknownError,
)
from langgraph_durable.core.ops import Batch, Script
from langgraph_durable.io import hazards
from tests.helpers import graphs
from tests.helpers.ledger_agent import START_INPUT, Effects, agent_graph, answer, normalized
from tests.helpers.plans import RoundTrips, one
from tests.helpers.redis_keys import glob_escape
from tests.helpers.servers import Server, start_server

NO_DISK = ("--save", "", "--appendonly", "no")


@pytest.fixture
def private(tmp_path: Path) -> Iterator[Callable[..., Server]]:
    """Start private redis-servers with extra options; all stopped after the test."""
    started: list[Server] = []

    def start(*options: str) -> Server:
        workdir = tmp_path / f"redis-{len(started)}"
        workdir.mkdir()
        server = start_server(str(workdir), *NO_DISK, *options)
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


@pytest.fixture
def fresh_warnings(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test sees the once-per-process warnings afresh (ports are reused)."""
    monkeypatch.setattr(hazards, "_reported", set())


def eviction_records(caplog: pytest.LogCaptureFixture, level: int) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "langgraph_durable"
        and r.levelno == level
        and "maxmemory-policy" in r.getMessage()
    ]


# -- 1. an eviction policy that can drop the saver's keys ----------------------------------
@pytest.mark.parametrize(
    ("policy", "ttl", "warned"),
    [
        ("allkeys-lru", None, True),
        ("allkeys-random", 60, True),
        ("volatile-lru", 60, True),
        ("volatile-lru", None, False),  # no key of the saver has a TTL: none can go
        ("noeviction", 60, False),
    ],
)
def test_setup_warns_once_when_redis_may_evict_the_savers_keys(
    private: Callable[..., Server],
    fresh_warnings: None,
    caplog: pytest.LogCaptureFixture,
    policy: str,
    ttl: int | None,
    warned: bool,
) -> None:
    server = private("--maxmemory-policy", policy, "--maxmemory", "100mb")
    caplog.set_level(logging.DEBUG, logger="langgraph_durable")
    with RedisSaver.from_conn_string(server.url, ttl=ttl) as saver:
        saver.setup()  # again: still one warning
        with RedisSaver.from_conn_string(server.url, ttl=ttl):  # a second saver, same server
            pass
    warnings = eviction_records(caplog, logging.WARNING)
    if not warned:
        assert warnings == []
        return
    (message,) = warnings
    assert repr(policy) in message and f"127.0.0.1:{server.port}" in message
    assert "set maxmemory-policy noeviction" in message


async def test_asetup_warns_too(
    private: Callable[..., Server], fresh_warnings: None, caplog: pytest.LogCaptureFixture
) -> None:
    server = private("--maxmemory-policy", "allkeys-lfu")
    async with AsyncRedisSaver.from_conn_string(server.url) as saver:
        await saver.asetup()
    (message,) = eviction_records(caplog, logging.WARNING)
    assert "'allkeys-lfu'" in message


def test_without_config_permission_setup_says_at_debug_level_it_could_not_check(
    private: Callable[..., Server], fresh_warnings: None, caplog: pytest.LogCaptureFixture
) -> None:
    server = private("--maxmemory-policy", "allkeys-lru")
    admin = redis.Redis(port=server.port)
    admin.execute_command("ACL", "SETUSER", "app", "on", ">secret", "~*", "&*", "+@all", "-config")
    admin.close()
    caplog.set_level(logging.DEBUG, logger="langgraph_durable")
    url = f"redis://app:secret@127.0.0.1:{server.port}/0"
    with RedisSaver.from_conn_string(url) as saver:  # no failure
        saver.put(
            {"configurable": {"thread_id": "t", "checkpoint_ns": ""}},
            empty_checkpoint(),
            {"source": "input", "step": -1},
            {},
        )
    assert eviction_records(caplog, logging.WARNING) == []
    (message,) = eviction_records(caplog, logging.DEBUG)
    assert "could not check" in message and "no permissions" in message


@pytest.mark.parametrize("flavour", ["sync", "async"])
async def test_on_a_cluster_every_primary_is_checked(
    cluster_url: str, fresh_warnings: None, caplog: pytest.LogCaptureFixture, flavour: str
) -> None:
    client = redis.cluster.RedisCluster.from_url(cluster_url)
    url_port = int(cluster_url.rsplit(":", 1)[1])
    node = next(n for n in client.get_primaries() if n.port != url_port)  # not the URL's
    client.config_set("maxmemory-policy", "allkeys-lru", target_nodes=node)
    try:
        if flavour == "sync":
            with RedisSaver.from_conn_string(cluster_url, cluster=True):
                pass
        else:
            async with AsyncRedisSaver.from_conn_string(cluster_url, cluster=True):
                pass
    finally:
        client.config_set("maxmemory-policy", "noeviction", target_nodes=node)
        client.close()
    (message,) = eviction_records(caplog, logging.WARNING)
    assert node.name in message and "'allkeys-lru'" in message


def test_the_decision_is_the_policy_and_the_ttl() -> None:
    assert hazards.eviction_hazard("allkeys-lru", None)
    assert hazards.eviction_hazard("volatile-ttl", 5)
    assert hazards.eviction_hazard("volatile-ttl", None) is None
    assert hazards.eviction_hazard("noeviction", 5) is None
    assert hazards.policy_of({b"maxmemory-policy": b"allkeys-lru"}) == "allkeys-lru"
    assert hazards.policy_of({}) is None


# -- 2. partial loss of a thread's keys never makes the ledger forget a recorded call --------
class Crash(BaseException):
    """The process dies here: nothing after it runs, nothing catches it."""


LEDGER_CONFIG = {"configurable": {"thread_id": "t"}}


def crash_after_round_0(ledger: ToolLedger, calls: list[str]) -> Callable[[Any, Any], Any]:
    """A wrap_tool_call that counts the tools that really run and dies once round 0's
    three results are recorded, before LangGraph saves the task's writes."""
    crashed: list[bool] = []
    lock = threading.Lock()
    recorded: list[str] = []

    def wrap(request: Any, execute: Any) -> Any:
        result = ledger.wrap_tool_call(
            request, lambda r: (calls.append(r.tool_call["name"]), execute(r))[1]
        )
        with lock:
            recorded.append(request.tool_call["name"])
            last = len(recorded) == 3 and not crashed
            if last:
                crashed.append(True)
        if last:
            raise Crash("after round 0's results")
        return result

    return wrap


def crashed_agent(
    saver: RedisSaver, tmp_path: Path, policies: dict[str, Any]
) -> tuple[Any, list[str], Effects]:
    effects = Effects(str(tmp_path / "effects"))
    ledger = ToolLedger(saver, policies=policies)
    calls: list[str] = []
    graph = agent_graph(ledger, effects, wrap=crash_after_round_0(ledger, calls)).compile(
        checkpointer=saver
    )
    with pytest.raises(Crash):
        graph.invoke(START_INPUT, LEDGER_CONFIG)
    assert sorted(calls) == ["charge", "create_ticket", "send_email"]
    return graph, calls, effects


def test_a_lost_ledger_index_still_replays_the_recorded_results(
    saver: RedisSaver, redis_client: redis.Redis, redis_url: str, tmp_path: Path
) -> None:
    with RedisSaver.from_conn_string(redis_url, key_prefix=saver.key_prefix + "ref") as other:
        reference = normalized(
            agent_graph(ToolLedger(other), Effects(str(tmp_path / "ref")))
            .compile(checkpointer=other)
            .invoke(START_INPUT, {"configurable": {"thread_id": "ref"}})["messages"]
        )
        other.delete_thread("ref")
    everything_fails = dict.fromkeys(("charge", "send_email", "create_ticket"), "fail")
    graph, calls, effects = crashed_agent(saver, tmp_path, everything_fails)
    tk = saver.keys.thread("t")
    assert redis_client.delete(tk.lgx) == 1  # evicted: the records stay
    out = graph.invoke(None, LEDGER_CONFIG)
    assert normalized(out["messages"]) == reference
    assert len(calls) == 9, "round 0's calls were replayed from their records, not re-run"
    assert [e["tool"] for e in effects.lines() if e["kind"] == "effect"].count("charge") == 3
    assert redis_client.zcard(tk.lgx) == redis_client.hlen(tk.lg) == 9  # index repaired


@pytest.mark.parametrize("policy", ["fail", "escalate"])
def test_lost_ledger_records_are_unknown_outcomes_never_a_silent_rerun(
    saver: RedisSaver, redis_client: redis.Redis, tmp_path: Path, policy: str
) -> None:
    policies = dict.fromkeys(("charge", "send_email", "create_ticket"), policy)
    graph, calls, effects = crashed_agent(saver, tmp_path, policies)
    assert redis_client.delete(saver.keys.thread("t").lg) == 1  # evicted: the index stays
    if policy == "fail":
        with pytest.raises(ToolOutcomeUnknownError, match="damaged"):
            graph.invoke(None, LEDGER_CONFIG)
        assert len(calls) == 3, "no call ran again"
        return
    asked = []
    out = graph.invoke(None, LEDGER_CONFIG)
    while out.get("__interrupt__"):
        (pending,) = out["__interrupt__"]
        asked.append(pending.value["name"])
        out = graph.invoke(Command(resume=answer(pending.value, effects)), LEDGER_CONFIG)
    assert asked == ["charge", "send_email", "create_ticket"]  # each asked about
    assert len(calls) == 9, "round 0 was answered from the effects (skip), not re-run"
    for tool_name in ("charge", "send_email", "create_ticket"):
        assert [e["tool"] for e in effects.lines() if e["kind"] == "effect"].count(tool_name) == 3


# -- 2b. a checkpoint or write index lost while its records stay: rebuilt, never a new past --
def interrupted_thread(saver: RedisSaver) -> tuple[Any, dict[str, Any]]:
    """A graph stopped at an interrupt after two steps: checkpoints with pending writes."""

    class State(TypedDict):
        trail: Annotated[list[str], operator.add]

    def ask(state: State) -> dict[str, Any]:
        return {"trail": [interrupt("go on?")]}

    builder = StateGraph(State)
    builder.add_node("a", lambda s: {"trail": ["a"]})
    builder.add_node("ask", ask)
    builder.add_edge(START, "a")
    builder.add_edge("a", "ask")
    builder.add_edge("ask", END)
    graph = builder.compile(checkpointer=saver)
    config = {"configurable": {"thread_id": "t"}}
    assert graph.invoke({"trail": ["in"]}, config)["__interrupt__"]
    return graph, config


@pytest.mark.parametrize("lost", ["cps", "wix", "both"])
def test_a_lost_checkpoint_or_write_index_is_rebuilt_from_the_records(
    saver: RedisSaver, redis_client: redis.Redis, caplog: pytest.LogCaptureFixture, lost: str
) -> None:
    graph, config = interrupted_thread(saver)
    tk = saver.keys.thread("t")
    before = graph.get_state(config)
    history = [s.config for s in graph.get_state_history(config)]
    writes = redis_client.zcard(tk.wix)
    assert writes > 0 and before.interrupts
    for kind in ("cps", "wix") if lost == "both" else (lost,):
        assert redis_client.delete(getattr(tk, kind)) == 1  # evicted: the records stay
    after = graph.get_state(config)
    assert after.values == before.values and after.config == before.config
    assert after.interrupts == before.interrupts, "the pending interrupt write is back"
    assert [s.config for s in graph.get_state_history(config)] == history
    assert redis_client.zcard(tk.cps) == len(history) and redis_client.zcard(tk.wix) == writes
    assert redis_client.ttl(tk.cps) == -1  # no ttl configured: none set
    assert any("lacked" in r.getMessage() and r.levelno == logging.ERROR for r in caplog.records)
    out = graph.invoke(Command(resume="yes"), config)  # the run goes on from where it was
    assert out["trail"] == ["in", "a", "yes"]
    assert len(list(graph.get_state_history(config))) == len(history) + 1


def test_a_read_that_may_not_write_reports_a_lost_index_and_verify_repair_rebuilds_it(
    saver: RedisSaver, redis_client: redis.Redis, redis_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    graph, config = interrupted_thread(saver)
    tk = saver.keys.thread("t")
    redis_client.delete(tk.cps, tk.wix)
    with RedisSaver.from_conn_string(
        redis_url, key_prefix=saver.key_prefix, repair_on_read=False
    ) as reader:
        assert reader.get_tuple(config) is None  # not read, but said so
        assert any("verify --repair" in r.getMessage() for r in caplog.records)
        assert not redis_client.exists(tk.cps), "a read that may not write wrote"
        report = reader.verify("t")
        assert not report.ok
        assert {f.key for f in report.findings if f.reason == "record not in the index"} == {
            tk.cps,
            tk.wix,
        }
    from langgraph_durable.core.repair import repair

    repaired = saver.drive(repair(saver.core, "t"))
    assert repaired.reindexed == redis_client.zcard(tk.cps) + redis_client.zcard(tk.wix) > 0
    assert saver.verify("t").ok
    assert graph.get_state(config).interrupts


def test_every_thread_is_found_even_without_its_checkpoint_index(
    saver: RedisSaver, redis_client: redis.Redis
) -> None:
    interrupted_thread(saver)
    _, checkpoint, metadata, versions = child_of(saver, None, 0)
    saver.put(
        {"configurable": {"thread_id": "other", "checkpoint_ns": ""}},
        checkpoint,
        metadata,
        versions,
    )
    redis_client.delete(saver.keys.thread("t").cps)
    assert saver.drive(saver.core.all_thread_ids()) == ["other", "t"]
    assert {c.config["configurable"]["thread_id"] for c in saver.list(None)} == {"other", "t"}


# -- 3. a write whose parent checkpoint is gone is refused, typed ---------------------------
def thread_snapshot(client: redis.Redis, saver: RedisSaver, thread: str) -> dict[bytes, Any]:
    """Every key of a thread: its type, its whole content and whether it has a TTL."""
    tk = saver.keys.thread(thread)
    pattern = glob_escape(tk.cps[: -len("cps")]) + "*"
    out: dict[bytes, Any] = {}
    for key in client.scan_iter(match=pattern):
        kind = client.type(key)
        content = {
            b"hash": client.hgetall,
            b"zset": lambda k: client.zrange(k, 0, -1, withscores=True),
            b"string": client.get,
        }[kind](key)
        out[key] = (kind, content, client.ttl(key) > 0)
    return out


@pytest.mark.parametrize("durability", ["sync", "async"])
def test_a_run_whose_checkpoints_were_flushed_midway_stops_with_checkpoint_lost(
    private: Callable[..., Server], durability: str
) -> None:
    server = private()
    admin = redis.Redis(port=server.port)
    flushed: list[bool] = []

    def flush(state: graphs.CounterState) -> dict[str, Any]:
        if not flushed:  # as a restart without persistence would, between two steps
            admin.flushdb()
            flushed.append(True)
        return {"value": state["value"] * 10, "trail": ["b"]}

    config = {"configurable": {"thread_id": "t"}}
    with RedisSaver.from_conn_string(server.url) as saver:
        graph = graphs.chain(
            graphs.CounterState,
            ("a", lambda s: {"value": s["value"] + 1, "trail": ["a"]}),
            ("b", flush),
            ("c", lambda s: {"value": s["value"] - 3, "trail": ["c"]}),
        ).compile(checkpointer=saver)
        with pytest.raises(CheckpointLostError) as lost:
            graph.invoke({"value": 1, "trail": []}, config, durability=durability)
        assert lost.value.thread_id == "t" and lost.value.checkpoint_ns == ""
        assert lost.value.parent_checkpoint_id in str(lost.value)
        assert "flushed" in str(lost.value) and "noeviction" in str(lost.value)
        assert saver.get_tuple(config) is None  # no checkpoint that builds on nothing
        assert not admin.exists(*saver.keys.thread("t").all()[:3:2])  # no cps, no cp
    admin.close()


@pytest.mark.parametrize("durability", ["sync", "async"])
def test_building_on_a_flushed_checkpoint_raises_and_writes_no_checkpoint(
    private: Callable[..., Server], durability: str
) -> None:
    server = private()
    admin = redis.Redis(port=server.port)
    config = {"configurable": {"thread_id": "t"}}
    with RedisSaver.from_conn_string(server.url) as saver:
        graph = graphs.react_graph(rounds=2).compile(checkpointer=saver)
        graph.invoke(graphs.react_input(), config)
        last = saver.get_tuple(config)
        assert last is not None
        admin.flushdb()
        with pytest.raises(CheckpointLostError) as lost:
            graph.update_state(last.config, {"messages": [HumanMessage("hi", id="h2")]})
        assert lost.value.parent_checkpoint_id == last.config["configurable"]["checkpoint_id"]
        assert "record is not there" in lost.value.missing
        assert admin.dbsize() == 0, "the refused write left nothing behind"
        with pytest.raises(CheckpointLostError):
            graph.invoke(graphs.react_input("again"), last.config, durability=durability)
        # LangGraph stores an input's writes before its checkpoint (and with "async" runs
        # on while its puts fail): those writes stay, but no checkpoint builds on nothing.
        assert saver.get_tuple(config) is None
        assert not admin.exists(saver.keys.thread("t").cps)
    admin.close()


def test_a_parent_whose_values_are_gone_is_lost_too(private: Callable[..., Server]) -> None:
    server = private()
    admin = redis.Redis(port=server.port)
    config = {"configurable": {"thread_id": "t"}}
    with RedisSaver.from_conn_string(server.url) as saver:
        bl = saver.keys.thread("t").bl

        def evict_values(state: graphs.CounterState) -> dict[str, Any]:
            admin.delete(bl)  # evicted: the index and the records stay
            return {"value": state["value"] * 10, "trail": ["b"]}

        graph = graphs.chain(
            graphs.CounterState,
            ("a", lambda s: {"value": s["value"] + 1, "trail": ["a"]}),
            ("b", evict_values),
        ).compile(checkpointer=saver)
        with pytest.raises(CheckpointLostError, match="it passes on is missing"):
            graph.invoke({"value": 1, "trail": []}, config, durability="sync")
        assert not admin.exists(bl), "the refused write took its values back"
        assert admin.zcard(saver.keys.thread("t").cps) == 3  # steps -1, 0, 1: no step 2
    admin.close()


@pytest.mark.parametrize("ttl", [None, 60])  # the compact layout and the full one
def test_the_parent_is_checked_by_its_record_and_a_damaged_hash_is_repaired_not_refused(
    redis_url: str, key_prefix: str, redis_client: redis.Redis, ttl: int | None
) -> None:
    with RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix, ttl=ttl) as saver:
        tk = saver.keys.thread("t")
        first = saver.put(*child_of(saver, None, 1))
        second = saver.put(*child_of(saver, first, 2))
        parent = saver.keys.checkpoint_member("", second["configurable"]["checkpoint_id"])
        # its index entry lost alone: the record is there, the put goes on
        args = child_of(saver, second, 3)  # (a read would put the entry back)
        redis_client.zrem(tk.cps, parent)
        third = saver.put(*args)
        third_member = saver.keys.checkpoint_member("", third["configurable"]["checkpoint_id"])
        assert redis_client.hexists(tk.cp, third_member)
        # its record gone, its index entry kept: a parent no read could use, refused
        args = child_of(saver, third, 4)
        redis_client.hdel(tk.cp, third_member)
        before = redis_client.hlen(tk.cp)
        with pytest.raises(CheckpointLostError, match="record is not there"):
            saver.put(*args)
        assert redis_client.hlen(tk.cp) == before, "the refused put wrote a record"
        # the checkpoint hash of the wrong type: damage, moved aside by the write, not a
        # parent lost (before the check read the record, the write went on the same way)
        redis_client.delete(tk.cp)
        redis_client.set(tk.cp, "not a hash")
        _, checkpoint, metadata, versions = child_of(saver, None, 5)  # read nothing
        saver.put(second, checkpoint, metadata, versions)
        assert redis_client.get(tk.cp + ":damaged") == b"not a hash"
        assert redis_client.type(tk.cp) == b"hash"


# -- 4. no limit of Lua's unpack(): a crashed 20,000-task fan-out reads back ---------------
FAN_OUT = 20_000


class FanState(TypedDict):
    done: Annotated[list[int], operator.add]


def fan_out_graph(width: int) -> StateGraph:
    """START sends ``width`` tasks; the last one stops the step with an interrupt after
    the others saved their writes, as a crash would leave it."""

    def work(item: int) -> dict[str, Any]:
        if item == width - 1:
            interrupt("the fan-out stopped here")
        return {"done": [item]}

    builder = StateGraph(FanState)
    builder.add_node("work", work)
    builder.add_conditional_edges(START, lambda state: [Send("work", i) for i in range(width)])
    builder.add_edge("work", END)
    return builder


def test_a_checkpoint_with_20000_pending_writes_reads_back_whole_and_resumes(
    private: Callable[..., Server],
) -> None:
    server = private()
    config = {"configurable": {"thread_id": "fan"}}
    with RedisSaver.from_conn_string(server.url) as saver:
        graph = fan_out_graph(FAN_OUT).compile(checkpointer=saver)
        out = graph.invoke({"done": []}, config)  # ~25 s on a busy 2-core machine
        assert out["__interrupt__"]
        stored = saver.get_tuple(config)
        assert stored is not None
        done = {v[0] for _, channel, v in stored.pending_writes if channel == "done"}
        assert len(done) == FAN_OUT - 1
        assert len({task for task, _, _ in stored.pending_writes}) == FAN_OUT
        out = graph.invoke(Command(resume="go on"), config)
        assert sorted(out["done"]) == list(range(FAN_OUT))


# -- 5. a write refused by a lease or a fence changes nothing --------------------------------
def elsewhere(fn: Callable[..., Any], *args: Any) -> Any:
    """Run ``fn`` as another worker would: in a context that holds none of our leases."""
    return contextvars.Context().run(fn, *args)


def child_of(
    saver: RedisSaver, parent: dict[str, Any] | None, step: int
) -> tuple[dict[str, Any], Checkpoint, dict[str, Any], dict[str, Any]]:
    """put() arguments for a checkpoint after ``parent`` (None: the thread's first) that
    gives channel "a" a new value."""
    stored = saver.get_tuple(parent) if parent else None
    cp = copy_checkpoint(stored.checkpoint) if stored else empty_checkpoint()
    cp["id"] = str(uuid6(clock_seq=step))
    version = saver.get_next_version(cp["channel_versions"].get("a"), None)
    cp["channel_versions"]["a"] = version
    cp["channel_values"]["a"] = f"value {step} " + "x" * 200
    config = parent or {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    return config, cp, {"source": "loop", "step": step}, {"a": version}


def take_over(saver: RedisSaver, thread: str) -> None:
    with saver.lease(thread):
        pass


def data_keys(snapshot: dict[bytes, Any]) -> dict[bytes, Any]:
    return {k: v for k, v in snapshot.items() if not k.endswith((b":lease", b":fence"))}


@pytest.mark.parametrize("ttl", [None, 60])
@pytest.mark.parametrize("values_before", [False, True])
def test_a_put_refused_by_a_lease_or_a_fence_leaves_the_thread_as_it_was(
    redis_url: str,
    key_prefix: str,
    redis_client: redis.Redis,
    ttl: int | None,
    values_before: bool,
) -> None:
    with (
        RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix, ttl=ttl) as saver,
        RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix, ttl=ttl) as other,
    ):
        first = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
        first = saver.put(first, empty_checkpoint(), {"source": "input", "step": -1}, {})
        if values_before:  # the value hash exists already, or is created by the refused put
            first = saver.put(*child_of(saver, first, 0))
        with saver.lease("t", ttl=30):  # refused: another worker holds the lease
            before = thread_snapshot(redis_client, saver, "t")
            with pytest.raises(LeaseHeldError):
                elsewhere(other.put, *child_of(other, first, 1))
            assert thread_snapshot(redis_client, saver, "t") == before
            redis_client.delete(saver.keys.thread("t").lease)  # lapsed; another worker
            elsewhere(take_over, other, "t")  # took the thread: our fencing token is stale
            before = thread_snapshot(redis_client, saver, "t")
            with pytest.raises(LeaseLostError):
                saver.put(*child_of(saver, first, 2))
            after = thread_snapshot(redis_client, saver, "t")
        assert after == before
        if ttl:
            assert all(has_ttl for _, _, has_ttl in after.values()), after


def test_a_retried_put_refused_after_it_went_through_keeps_its_values(
    redis_url: str, key_prefix: str, redis_client: redis.Redis
) -> None:
    with (
        RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix) as saver,
        RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix) as other,
    ):
        args = child_of(other, saver.put(*child_of(saver, None, 0)), 1)
        stored = other.put(*args)  # stored, but say its reply was lost: it is sent again
        before = thread_snapshot(redis_client, saver, "t")
        with saver.lease("t", ttl=30):
            with pytest.raises(LeaseHeldError):
                elsewhere(other.put, *args)
            assert data_keys(thread_snapshot(redis_client, saver, "t")) == before
        got = saver.get_tuple(stored)
        assert got is not None and got.checkpoint["channel_values"]["a"].startswith("value 1")


# -- 6. every key the saver creates for a thread carries the thread's TTL --------------------
def keys_without_ttl(client: redis.Redis, saver: RedisSaver, thread: str) -> list[bytes]:
    return sorted(
        k for k, (_, _, has_ttl) in thread_snapshot(client, saver, thread).items() if not has_ttl
    )


def test_quarantine_and_damaged_twins_carry_the_threads_ttl(
    redis_url: str, key_prefix: str, redis_client: redis.Redis
) -> None:
    config = {"configurable": {"thread_id": "t"}}
    with RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix, ttl=600) as saver:
        graph = graphs.react_graph(rounds=2).compile(checkpointer=saver)
        graph.invoke(graphs.react_input(), config)
        tk = saver.keys.thread("t")
        newest = saver.get_tuple(config)
        assert newest is not None
        member = saver.keys.checkpoint_member("", newest.config["configurable"]["checkpoint_id"])
        record = bytearray(redis_client.hget(tk.cp, member))
        record[-1] ^= 0x01  # a flipped bit
        redis_client.hset(tk.cp, member, bytes(record))
        redis_client.set(tk.wr, b"stray")  # the wrong type, and no TTL
        assert saver.get_tuple(config) is not None  # falls back, quarantines the record
        assert redis_client.exists(tk.qt) and redis_client.exists(tk.wr + ":damaged")
        assert keys_without_ttl(redis_client, saver, "t") == []  # made by a read
        redis_client.set(tk.lgx, b"stray")
        saver.prune(["t"], strategy="keep_latest")
        assert redis_client.exists(tk.lgx + ":damaged")
        assert keys_without_ttl(redis_client, saver, "t") == []  # made by retention
        redis_client.set(tk.runs, b"stray")
        graph.invoke({"messages": [HumanMessage("more", id="h2")]}, config)
        assert keys_without_ttl(redis_client, saver, "t") == []  # made by a write


# -- 7. an index whose records are gone is reported once, not walked on every read -----------
def chain_of(saver: RedisSaver, length: int) -> list[dict[str, Any]]:
    configs: list[dict[str, Any]] = []
    for step in range(length):
        configs.append(saver.put(*child_of(saver, configs[-1] if configs else None, step)))
    return configs


@pytest.mark.parametrize(
    "kinds", [("cps",), ("wix",), ("cp",), ("wr",), ("wix", "wr"), ("cps", "cp")]
)
def test_a_read_names_every_index_key_of_the_wrong_type(
    saver: RedisSaver,
    redis_client: redis.Redis,
    caplog: pytest.LogCaptureFixture,
    kinds: tuple[str, ...],
) -> None:
    """The read script tells a damaged key by the counts it takes of all four (no TYPE of
    its own): each of them is named, not only the first of a pair."""
    chain_of(saver, 2)
    tk = saver.keys.thread("t")
    for kind in kinds:
        redis_client.delete(getattr(tk, kind))
        redis_client.set(getattr(tk, kind), b"stray")
    with caplog.at_level(logging.ERROR, logger="langgraph_durable"):
        saver.get_tuple({"configurable": {"thread_id": "t"}})
    reported = {m for m in caplog.messages if "has the wrong type" in m}
    assert reported == {
        f"langgraph-durable: key {getattr(tk, kind)} of thread 't' has the wrong type (damaged): "
        "read as empty"
        for kind in kinds
    }


@pytest.mark.parametrize("counters", ["odd", {"messages": "x"}, {"messages": [None]}, [1, 2]])
def test_retention_keeps_the_chain_of_a_checkpoint_whose_delta_counters_are_unreadable(
    saver: RedisSaver, caplog: pytest.LogCaptureFixture, counters: Any
) -> None:
    configs = chain_of(saver, 4)
    config, checkpoint, metadata, versions = child_of(saver, configs[-1], 4)
    saver.put(config, checkpoint, {**metadata, "counters_since_delta_snapshot": counters}, versions)
    saver.prune(["t"])  # keep_latest: the newest, and whatever it may be rebuilt from
    assert len(list(saver.list({"configurable": {"thread_id": "t"}}))) == 5
    assert "retention keeps every ancestor" in caplog.text


def test_index_members_without_records_leave_the_index_once(
    saver: RedisSaver, redis_client: redis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    configs = chain_of(saver, 40)
    tk = saver.keys.thread("t")
    lost = configs[10:]
    for c in lost:  # evicted records, say: their index members stay
        redis_client.hdel(
            tk.cp, saver.keys.checkpoint_member("", c["configurable"]["checkpoint_id"])
        )
    counter = RoundTrips(saver)
    config = {"configurable": {"thread_id": "t"}}
    first = saver.get_tuple(config)
    assert first is not None and first.config == configs[9]
    assert counter.scripts("read_checkpoints") == 31
    skipped = [r for r in caplog.records if "skipped damaged checkpoint" in r.getMessage()]
    assert len(skipped) == 30
    caplog.clear()
    counter.reset()
    second = saver.get_tuple(config)
    assert second is not None and second.config == configs[9]
    assert counter.scripts("read_checkpoints") == 1, (
        "the second read no longer walks the lost members"
    )
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert redis_client.zcard(tk.cps) == 10 and redis_client.hlen(tk.qt) == 30
    with pytest.raises(CheckpointCorruptedError, match="missing record"):
        saver.get_tuple(lost[-1])
    assert (
        saver.get_tuple({"configurable": {**config["configurable"], "checkpoint_id": "nope"}})
        is None
    )


def test_a_member_deleted_by_retention_meanwhile_is_not_quarantined(
    saver: RedisSaver, redis_client: redis.Redis
) -> None:
    configs = chain_of(saver, 3)
    tk = saver.keys.thread("t")
    member = saver.keys.checkpoint_member("", configs[-1]["configurable"]["checkpoint_id"])
    redis_client.hdel(tk.cp, member)
    plan = saver.core.get_tuple({"configurable": {"thread_id": "t"}})
    op = next(plan)  # the read finds the member without its record
    op = plan.send(saver.drive(one(op)))
    (script,) = op.commands if isinstance(op, Batch) else [op]
    assert isinstance(script, Script) and script.name == "quarantine"
    redis_client.zrem(tk.cps, member)  # retention deletes it before the quarantine runs
    saver.drive(one(op))
    assert not redis_client.exists(tk.qt), "a deleted checkpoint is no damage"
