"""A damaged or missing element (elements.py) between two processes: the worker that
holds it keeps writing, a fresh reader moves aside the element (never the healthy
checkpoints naming it), the worker's next write sends it again, and every write it
acknowledges from then on reads back in a fresh process; writing the same content again
heals it."""

from __future__ import annotations

import operator
from typing import Annotated, Any

import pytest
import redis
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

from langgraph_durable import RedisSaver
from langgraph_durable.core.ops import Batch, Script
from langgraph_durable.core.records import Damage
from langgraph_durable.core.repair import repair
from tests.helpers import graphs
from tests.helpers.redis_keys import flipped


def config(thread_id: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread_id}}


def newest(thread_id: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}


def agent() -> Any:
    return graphs.react_graph(rounds=2, payload=600, realistic=True)


def first_element(client: redis.Redis, saver: RedisSaver, thread_id: str) -> bytes:
    """The digest of the element the most checkpoints name (the oldest message)."""
    tk = saver.keys.thread(thread_id)
    digests = client.hkeys(tk.el)
    manifests = [
        client.hget(tk.bl, saver.keys.blob_field("", "messages", version)) or b""
        for t in saver.list(config(thread_id))
        if (version := t.checkpoint["channel_versions"].get("messages"))
    ]
    named = {d: sum(d in m for m in manifests) for d in digests}
    digest = max(named, key=lambda d: named[d])
    assert named[digest] >= 3, "an element several checkpoints name"
    return digest


@pytest.mark.parametrize("damage", ["bit flip", "field deleted"])
def test_a_damaged_element_costs_no_healthy_checkpoint_and_is_written_again(
    redis_url: str, key_prefix: str, redis_client: redis.Redis, damage: str
) -> None:
    with RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix) as worker:
        graph = agent().compile(checkpointer=worker)
        graph.invoke(graphs.react_input("first"), config("t"))
        tk = worker.keys.thread("t")
        digest = first_element(redis_client, worker, "t")
        if damage == "bit flip":
            redis_client.hset(tk.el, digest, flipped(redis_client.hget(tk.el, digest)))
        else:
            redis_client.hdel(tk.el, digest)
        checkpoints = redis_client.zcard(tk.cps)

        # A fresh reader falls back (what names the element cannot be read yet) and
        # moves the element aside, never a checkpoint record.
        with RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix) as reader:
            assert reader.get_tuple(newest("t")) is not None
            assert reader.recovery_report("t").fell_back
        assert redis_client.zcard(tk.cps) == checkpoints, "healthy checkpoints quarantined"
        assert not any(f.startswith(b"cp") for f in redis_client.hkeys(tk.qt))
        assert not redis_client.hexists(tk.el, digest)

        # The worker, which holds the element, goes on: its next write names the element,
        # finds it gone, and sends it again.
        graph.invoke(graphs.react_input("second"), config("t"))
        written = worker.get_tuple(newest("t")).checkpoint

    with RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix) as fresh:
        tup = fresh.get_tuple(newest("t"))
        assert tup.checkpoint["id"] == written["id"], "an acknowledged write is unreadable"
        assert fresh.recovery_report("t") is None
        report = fresh.verify("t")  # the damaged bytes stay in quarantine, for forensics
        assert not report.damaged_checkpoints and not report.findings, report
        # and the checkpoints before the damage read again too
        assert all(fresh.get_tuple(t.config) is not None for t in fresh.list(config("t")))


def test_writing_the_same_content_again_heals_a_damaged_element(
    redis_url: str, key_prefix: str, redis_client: redis.Redis
) -> None:
    """A run that re-creates the same messages in another process (no cache) writes the
    element over its damaged bytes: the next process does not fall back again."""
    with RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix) as first:
        agent().compile(checkpointer=first).invoke(graphs.react_input("same"), config("a"))
        tk = first.keys.thread("a")
        digest = first_element(redis_client, first, "a")
    redis_client.hset(tk.el, digest, flipped(redis_client.hget(tk.el, digest)))
    with RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix, repair_on_read=False) as s:
        # the same content in the same thread, from a fresh process: a fork from the start
        history = list(s.list(config("a")))
        graph = agent().compile(checkpointer=s)
        graph.invoke(graphs.react_input("same"), history[-1].config)
    assert redis_client.hget(tk.el, digest) is not None
    with RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix) as fresh:
        assert fresh.verify("a").ok, fresh.verify("a").findings


class Docs(TypedDict):
    docs: list[str]  # set once, then kept by every step
    n: int


DOCS = [f"document {i} " * 40 for i in range(4)]
KEY, NEW_KEY = b"k" * 32, b"n" * 32


def _docs_graph(saver: Any, between: Any) -> Any:
    builder = StateGraph(Docs)
    builder.add_node("a", lambda s: {"n": s["n"] + 1})
    builder.add_node("b", lambda s: between() or {"n": s["n"] + 1})
    builder.add_node("c", lambda s: {"n": s["n"] + 1})
    builder.add_edge(START, "a")
    builder.add_edge("a", "b")
    builder.add_edge("b", "c")
    builder.add_edge("c", END)
    return builder.compile(checkpointer=saver)


def _encrypted() -> Any:
    pytest.importorskip("Crypto")
    from langgraph.checkpoint.serde.encrypted import EncryptedSerializer

    return EncryptedSerializer.from_pycryptodome_aes(key=b"0123456789abcdef")


@pytest.mark.parametrize("cache", ["kept", "emptied"])
@pytest.mark.parametrize(
    "damage", ["bit flip, verify_elements_on_write", "truncated", "garbage appended"]
)
def test_the_next_write_finds_damaged_bytes_and_writes_them_again(
    redis_url: str,
    key_prefix: str,
    redis_client: redis.Redis,
    caplog: pytest.LogCaptureFixture,
    cache: str,
    damage: str,
) -> None:
    """An element changed in place between two steps, no reader in between: the worker's
    next put checks every element it names without sending (its length; with
    ``verify_elements_on_write`` its bytes), finds the damage and sends the good bytes,
    so a fresh process reads what the worker acknowledged without falling back.
    Emptying the element cache (as when full) keeps what the put checks against."""
    verify = damage.endswith("verify_elements_on_write")
    with RedisSaver.from_conn_string(
        redis_url, key_prefix=key_prefix, verify_elements_on_write=verify
    ) as worker:
        tk = worker.keys.thread("t")
        _docs_graph(worker, lambda: None).invoke({"docs": DOCS, "n": 0}, config("t"))
        digest = min(redis_client.hkeys(tk.el))
        good = redis_client.hget(tk.el, digest)
        bad = {"truncated": good[:-1], "garbage appended": good + b"\0"}.get(damage)

        def damage_it() -> None:
            redis_client.hset(tk.el, digest, bad or flipped(good))
            if cache == "emptied":
                worker.core.element_cache.empty()

        with caplog.at_level("WARNING", logger="langgraph_durable"):
            out = _docs_graph(worker, damage_it).invoke({"n": 10}, config("t"))
        assert out == {"docs": DOCS, "n": 13}
        assert "damaged in Redis" in caplog.text
        assert redis_client.hget(tk.el, digest) == good, "the next write left the damage"

    with RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix) as fresh:
        tup = fresh.get_tuple(newest("t"))
        assert tup.checkpoint["channel_values"] == out, "an acknowledged write is unreadable"
        assert fresh.recovery_report("t") is None
        assert fresh.verify("t").ok


@pytest.mark.parametrize("case", ["encrypted, cache emptied", "a rotating worker"])
def test_a_kept_list_whose_element_went_missing_is_written_again(
    redis_url: str, key_prefix: str, redis_client: redis.Redis, case: str
) -> None:
    """Between two steps of a run an element of a list no step changes goes missing (a
    reader quarantined it): the worker's next put writes it again, though splitting the
    list again gives other digests (a fresh ciphertext; a newer signing key's digests):
    the kept value's manifest is made again, naming elements that are there."""
    options: dict[str, Any] = {"signing_key": KEY}
    worker_options: dict[str, Any] = {"signing_key": KEY}
    if case.startswith("encrypted"):
        options["serde"], worker_options["serde"] = _encrypted(), _encrypted()
    else:
        worker_options["signing_key"] = [NEW_KEY, KEY]
    with RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix, **options) as writer:
        _docs_graph(writer, lambda: None).invoke({"docs": DOCS, "n": 0}, config("t"))
    with RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix, **worker_options) as w:
        tk = w.keys.thread("t")

        def lose() -> None:
            redis_client.hdel(tk.el, min(redis_client.hkeys(tk.el)))
            w.core.element_cache.__init__()  # emptied whole when full

        out = _docs_graph(w, lose).invoke({"n": 10}, config("t"))
        assert out["docs"] == DOCS and out["n"] == 13
    with RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix, **worker_options) as fresh:
        tup = fresh.get_tuple(newest("t"))
        assert tup.checkpoint["channel_values"] == {"docs": DOCS, "n": 13}
        assert fresh.recovery_report("t") is None


def test_repair_by_a_reader_without_the_key_leaves_a_signed_threads_elements(
    redis_url: str, key_prefix: str, redis_client: redis.Redis
) -> None:
    """Element digests are keyed with the signing key: to a reader without it (or with
    another key) they do not match, which is its configuration, not damage. ``verify``
    says so and ``repair`` moves nothing, so the writer still reads its thread."""
    with RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix, signing_key=KEY) as w:
        agent().compile(checkpointer=w).invoke(graphs.react_input("signed"), config("s"))
        written = w.get_tuple(newest("s")).checkpoint
        tk = w.keys.thread("s")
    elements_before = redis_client.hlen(tk.el)
    assert elements_before
    for other in ({}, {"signing_key": NEW_KEY}):
        with RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix, **other) as reader:
            report = reader.verify("s")
            assert {Damage.of(f.reason) for f in report.findings if f.kind == "element"} <= {
                Damage.BAD_SIGNATURE
            }
            assert reader.drive(repair(reader.core, "s")).moved == []
    assert redis_client.hlen(tk.el) == elements_before
    with RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix, signing_key=KEY) as w:
        assert w.get_tuple(newest("s")).checkpoint["id"] == written["id"]
        assert w.verify("s").ok


class LongDocs(TypedDict):
    docs: list[str]
    n: int
    stop: int


LONG_DOCS = [f"long document {i} " * 30 for i in range(40)]


def _loop_graph(saver: Any, between: Any) -> Any:
    """One node, run until ``n`` reaches ``stop``: one put per step, the list kept."""
    builder = StateGraph(LongDocs)
    builder.add_node("step", lambda s: between(s["n"]) or {"n": s["n"] + 1})
    builder.add_edge(START, "step")
    builder.add_conditional_edges("step", lambda s: END if s["n"] >= s["stop"] else "step")
    return builder.compile(checkpointer=saver)


def _docs_elements(client: redis.Redis, saver: RedisSaver, thread_id: str) -> list[bytes]:
    """The digests of the elements the newest checkpoint's ``docs`` list names."""
    tk = saver.keys.thread(thread_id)
    version = saver.get_tuple(newest(thread_id)).checkpoint["channel_versions"]["docs"]
    manifest = client.hget(tk.bl, saver.keys.blob_field("", "docs", version)) or b""
    digests = sorted(d for d in client.hkeys(tk.el) if d in manifest)
    assert len(digests) == len(LONG_DOCS)
    return digests


@pytest.mark.parametrize("how", ["truncated", "extended", "missing"])
def test_a_long_lists_damage_is_found_by_the_puts_that_follow_within_their_turn(
    redis_url: str,
    key_prefix: str,
    redis_client: redis.Redis,
    caplog: pytest.LogCaptureFixture,
    how: str,
) -> None:
    """A put checks a window of CHECKED_PER_PUT of the elements it names without sending
    (the cost stays flat as the thread grows), moved on from put to put: an element of a
    40-element list truncated, extended or deleted in place, no reader in between, is
    found and written again within ceil(40 / 8) = 5 puts, wherever it sits in the list
    (the window's small elements are read whole in one HMGET, their lengths summed)."""
    from langgraph_durable.core.element_window import CHECKED_PER_PUT

    turns = -(-len(LONG_DOCS) // CHECKED_PER_PUT)
    with RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix) as worker:
        tk = worker.keys.thread("t")
        _loop_graph(worker, lambda n: None).invoke(
            {"docs": LONG_DOCS, "n": 0, "stop": 1}, config("t")
        )
        digests = _docs_elements(redis_client, worker, "t")
        for round_, digest in enumerate((digests[0], digests[17], digests[-1])):
            good = redis_client.hget(tk.el, digest)
            start = 100 * (round_ + 1)

            def damage(n: int, digest: bytes = digest, good: bytes = good, at: int = start) -> None:
                if n == at and how == "missing":
                    redis_client.hdel(tk.el, digest)
                elif n == at:
                    redis_client.hset(
                        tk.el, digest, good[:-1] if how == "truncated" else good + b"!"
                    )

            caplog.clear()
            with caplog.at_level("WARNING", logger="langgraph_durable"):
                out = _loop_graph(worker, damage).invoke(
                    {"n": start, "stop": start + turns + 1}, config("t")
                )
            assert out["docs"] == LONG_DOCS
            said = "missing in Redis" if how == "missing" else "damaged in Redis"
            assert said in caplog.text, f"element {digests.index(digest)} never checked"
            assert redis_client.hget(tk.el, digest) == good, "the puts left the damage"
    with RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix) as fresh:
        assert fresh.get_tuple(newest("t")).checkpoint["channel_values"]["docs"] == LONG_DOCS
        assert fresh.recovery_report("t") is None


def test_once_a_reader_quarantined_an_element_the_next_put_checks_them_all(
    redis_url: str, key_prefix: str, redis_client: redis.Redis
) -> None:
    """A reader that moves a damaged element aside leaves the thread's quarantine
    non-empty: from then on a put checks every element it names, so the worker's very
    next put writes the lost one again, whatever its window."""
    with RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix) as worker:
        tk = worker.keys.thread("t")
        graph = _loop_graph(worker, lambda n: None)
        graph.invoke({"docs": LONG_DOCS, "n": 0, "stop": 1}, config("t"))
        for digest in _docs_elements(redis_client, worker, "t")[::13]:
            redis_client.hset(tk.el, digest, flipped(redis_client.hget(tk.el, digest)))
            with RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix) as reader:
                assert reader.get_tuple(newest("t")) is not None
                assert reader.recovery_report("t").fell_back
            assert not redis_client.hexists(tk.el, digest), "the reader left it in place"
            n = graph.get_state(config("t")).values["n"]
            graph.invoke({"n": n, "stop": n + 1}, config("t"))  # one put
            assert redis_client.hexists(tk.el, digest), "the next put did not send it"
            with RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix) as fresh:
                assert fresh.get_tuple(newest("t")).checkpoint["channel_values"]["n"] == n + 1
                assert fresh.recovery_report("t") is None


def test_while_the_quarantine_holds_anything_a_put_stays_one_round_trip(
    redis_url: str, key_prefix: str, redis_client: redis.Redis
) -> None:
    """The put that finds the quarantine holding anything checks the rest of what it names
    in one more round trip; the puts after it check them all in their own round trip
    (a quarantine stays until someone closes its incident)."""
    from langgraph_durable.core.element_window import CHECKED_PER_PUT
    from tests.helpers.plans import RoundTrips

    def kind(op: Any) -> str:
        commands = op.commands if isinstance(op, Batch) else [op]
        return "+".join(c.name if isinstance(c, Script) else str(c[0]) for c in commands)

    with RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix) as worker:
        tk = worker.keys.thread("t")
        graph = _loop_graph(worker, lambda n: None)
        graph.invoke({"docs": LONG_DOCS, "n": 0, "stop": 1}, config("t"))
        digest = _docs_elements(redis_client, worker, "t")[-1]
        redis_client.hset(tk.el, digest, flipped(redis_client.hget(tk.el, digest)))
        with RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix) as reader:
            assert reader.get_tuple(newest("t")) is not None  # moves it aside
        assert redis_client.hlen(tk.qt) > 0
        trips = RoundTrips(graph.checkpointer)
        runs = []
        for _ in range(3):
            n = graph.get_state(config("t")).values["n"]
            trips.reset()
            graph.invoke({"n": n, "stop": n + 1}, config("t"))
            runs.append([kind(op) for op in trips.ops])
        assert redis_client.hget(tk.el, digest) is not None, "the put did not send it again"
        checks_alone = [[k for k in run if set(k.split("+")) == {"HSTRLEN"}] for run in runs]
        assert len(checks_alone[0]) == 1, "found the quarantine: the rest in one more trip"
        assert checks_alone[1:] == [[], []], "after: each put checks all in its own trip"
        for run in runs[1:]:
            puts = [k for k in run if "put_checkpoint" in k]
            rest = len(LONG_DOCS) - CHECKED_PER_PUT
            assert puts and all(k.count("HSTRLEN") == rest for k in puts), puts


class Growing(TypedDict):
    docs: Annotated[list[str], operator.add]
    n: int
    stop: int
    per_step: int


def _growing_graph(saver: Any, between: Any) -> Any:
    """A list that gains ``per_step`` documents at every step (one put per step)."""
    builder = StateGraph(Growing)

    def step(s: Growing) -> dict[str, Any]:
        between(s["n"])
        new = [f"doc {s['n']}.{i} " * 25 for i in range(s["per_step"])]
        return {"n": s["n"] + 1, "docs": new}

    builder.add_node("step", step)
    builder.add_edge(START, "step")
    builder.add_conditional_edges("step", lambda s: END if s["n"] >= s["stop"] else "step")
    return builder.compile(checkpointer=saver)


@pytest.mark.parametrize("per_step", [1, 4, 8])
@pytest.mark.parametrize("verify", [False, True])
def test_a_growing_lists_oldest_element_damaged_is_found_by_the_puts_that_follow(
    redis_url: str,
    key_prefix: str,
    redis_client: redis.Redis,
    caplog: pytest.LogCaptureFixture,
    per_step: int,
    verify: bool,
) -> None:
    """The window moves on from where the put before left off and grows with what a put
    sends, so it catches up with a list growing by 1, 4 or 8 elements a step: the oldest
    element, truncated after 40 steps, is found within ceil(n / 8) + 1 puts. With
    ``verify_elements_on_write``, a bit flip is found at the next put even after the
    process's fingerprints were reset (the split memo keeps them)."""
    from langgraph_durable.core.element_window import CHECKED_PER_PUT

    with RedisSaver.from_conn_string(
        redis_url, key_prefix=key_prefix, verify_elements_on_write=verify
    ) as worker:
        tk = worker.keys.thread("g")
        graph = _growing_graph(worker, lambda n: None)
        graph.invoke({"docs": [], "n": 0, "stop": 40, "per_step": per_step}, config("g"))
        version = worker.get_tuple(newest("g")).checkpoint["channel_versions"]["docs"]
        manifest = redis_client.hget(tk.bl, worker.keys.blob_field("", "docs", version)) or b""
        named = [d for d in redis_client.hkeys(tk.el) if d in manifest]
        oldest = min(named, key=manifest.find)
        good = redis_client.hget(tk.el, oldest)
        # every element (and block: blocks.py) is named by the newest checkpoint
        puts = 1 if verify else -(-redis_client.hlen(tk.el) // CHECKED_PER_PUT) + 1

        def damage(n: int) -> None:
            if n == 40:
                if verify:
                    worker.core.element_cache.forget_fingerprints()  # as when full
                redis_client.hset(tk.el, oldest, flipped(good) if verify else good[:-1])

        with caplog.at_level("WARNING", logger="langgraph_durable"):
            _growing_graph(worker, damage).invoke({"stop": 40 + puts}, config("g"))
        assert "damaged in Redis" in caplog.text, "the puts after the damage never checked it"
        assert redis_client.hget(tk.el, oldest) == good
    with RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix) as fresh:
        tup = fresh.get_tuple(newest("g"))
        assert tup.checkpoint["channel_values"]["n"] == 40 + puts
        assert fresh.recovery_report("g") is None
