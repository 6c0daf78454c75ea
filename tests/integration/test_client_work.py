"""The saver's own Python work per superstep, counted (deterministic, unlike timings):
the bytecode instructions executed in langgraph_durable's code by the put and put_writes
calls of the benchmark's ReAct workload, recorded from a real graph run and replayed on a
server of the test's own. Serializing the values (LangGraph's serializer, which every
saver pays, InMemorySaver too) and redis-py are not counted: what is counted is ours to
make smaller. A change that adds work to the write path fails here and says by how much;
docs/reference/performance.md says where a superstep's time goes."""

from __future__ import annotations

import copy
import sys
from pathlib import Path
from types import FrameType
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver

import langgraph_durable
from langgraph_durable import RedisSaver
from langgraph_durable.io import resp
from tests.helpers import graphs
from tests.helpers.servers import start_server

ROUNDS = 40  # tool rounds, as the benchmark's (a): 2 * ROUNDS + 1 supersteps
SUPERSTEPS = 2 * ROUNDS + 1
PAYLOAD = 1500  # the benchmark's characters per AI message
PACKAGE = str(Path(langgraph_durable.__file__).parent)
# Measured 2026-11-29 on Python 3.11, commands packed by wire.py's own packer (as
# without hiredis; with it, hiredis packs them and the count is lower): 8,469-8,487 per
# superstep since the usual config, channel names and replies are checked in C, records
# of up to 8 KB are hashed in one call, telemetry without an SDK is told by one
# comparison and a round trip's retry state is made only when it fails (9,217 before;
# 10,891-10,901 before the put took one appended message without parsing, sorted its
# window in C and sealed in fewer steps, a round trip's replies were read in one step,
# and where an operation runs was read only for a span that records it; 11,102 since a
# command's arguments are made bytes in one pass and its RESP headers in C; 13,278 with
# the write scripts' compact layouts, 13,552-13,561 before them; 1fabfa8: 15,793-15,840).
# Fewer bytecodes are not always less work: map(operator.call, ...) counted 10,165 here
# and executes more machine instructions than the comprehension (valgrind). The bound
# leaves room for a LangGraph that calls with other values, no more.
BOUND = 9_000
# get_tuple of the measured thread (82 messages, every element cached): 9,522-9,561 (9,736
# before the config was checked in C, 10,512 before that), of which ~43 a message
# deserializing it through the allowlist (serde.py's fast pass).
GET_BOUND = 10_050


class Recording(InMemorySaver):
    """InMemorySaver that keeps a copy of every put and put_writes call made to it."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[str, tuple[Any, ...]]] = []

    def put(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        conf = {k: v for k, v in config["configurable"].items() if isinstance(v, str)}
        args = copy.deepcopy((checkpoint, metadata, new_versions))
        self.calls.append(("put", ({"configurable": conf}, *args)))
        return super().put(config, checkpoint, metadata, new_versions)

    def put_writes(self, config: Any, writes: Any, task_id: str, task_path: str = "") -> None:
        conf = {k: v for k, v in config["configurable"].items() if isinstance(v, str)}
        args = copy.deepcopy((writes, task_id, task_path))
        self.calls.append(("put_writes", ({"configurable": conf}, *args)))
        super().put_writes(config, writes, task_id, task_path)


def replay(saver: RedisSaver, calls: list[tuple[str, tuple[Any, ...]]], thread: str) -> None:
    for method, (config, *rest) in calls:
        conf = {**config["configurable"], "thread_id": thread}
        getattr(saver, method)({"configurable": conf}, *rest)


def opcodes_in_package(run: Any) -> int:
    """Bytecode instructions ``run()`` executes in frames of langgraph_durable's files."""
    count = 0

    def local(frame: FrameType, event: str, arg: Any) -> Any:
        nonlocal count
        if event == "opcode":
            count += 1
        return local

    def tracer(frame: FrameType, event: str, arg: Any) -> Any:
        if not frame.f_code.co_filename.startswith(PACKAGE):
            return None
        frame.f_trace_opcodes = True
        frame.f_trace_lines = False
        return local

    previous = sys.gettrace()  # coverage's or a debugger's: given back after
    sys.settrace(tracer)
    try:
        run()
    finally:
        sys.settrace(previous)
    return count


def recorded(payload: int) -> list[tuple[str, tuple[Any, ...]]]:
    recording = Recording()
    graph = graphs.react_graph(rounds=ROUNDS, payload=payload).compile(checkpointer=recording)
    graph.invoke(graphs.react_input(), {"configurable": {"thread_id": "recorded"}})
    assert [m for m, _ in recording.calls].count("put") == SUPERSTEPS + 2  # and the input
    return recording.calls


@pytest.fixture(autouse=True)
def _packed_in_python(monkeypatch: pytest.MonkeyPatch) -> None:
    """Commands packed by wire.py's own packer, as without hiredis (the default install):
    with it installed, hiredis packs them in C and the count would be another one."""
    monkeypatch.setattr(resp, "_hiredis_pack", None)


def test_the_savers_python_work_per_superstep_stays_within_its_bound(tmp_path: Path) -> None:
    # The warm-up's messages are not the measured run's: every message of the measured
    # run is new to the saver (compressed, hashed, cached), as in a real run.
    warm_up, calls = recorded(PAYLOAD + 1), recorded(PAYLOAD)
    server = start_server(str(tmp_path))
    try:
        with RedisSaver.from_conn_string(server.url, key_prefix="lgdwork") as saver:
            replay(saver, warm_up, "warm-up")  # scripts loaded, caches as a worker's
            measured = opcodes_in_package(lambda: replay(saver, calls, "measured"))
            stored = saver.get_tuple({"configurable": {"thread_id": "measured"}})
    finally:
        server.stop()
    assert (
        stored is not None
        and len(stored.checkpoint["channel_values"]["messages"]) == 2 * ROUNDS + 2
    )
    per_superstep = measured / SUPERSTEPS
    print(f"\n{per_superstep:,.0f} bytecode instructions per superstep")
    assert per_superstep <= BOUND, (
        f"{per_superstep:,.0f} bytecode instructions per superstep in langgraph_durable's "
        f"put and put_writes, over the bound of {BOUND:,} by "
        f"{per_superstep - BOUND:,.0f} ({per_superstep / BOUND - 1:.0%})"
    )


def test_the_savers_python_work_per_get_tuple_stays_within_its_bound(tmp_path: Path) -> None:
    """get_tuple of the newest checkpoint of the workload's thread, as a worker reads it
    (its elements cached): the bytecode instructions of langgraph_durable's code,
    deserializing the messages through the allowlist included."""
    calls = recorded(PAYLOAD)
    server = start_server(str(tmp_path))
    config = {"configurable": {"thread_id": "measured"}}
    try:
        with RedisSaver.from_conn_string(server.url, key_prefix="lgdwork") as saver:
            replay(saver, calls, "measured")
            saver.get_tuple(config)  # as a worker that read it before
            got: list[Any] = []
            measured = opcodes_in_package(lambda: got.append(saver.get_tuple(config)))
    finally:
        server.stop()
    assert len(got[0].checkpoint["channel_values"]["messages"]) == 2 * ROUNDS + 2
    print(f"\n{measured:,} bytecode instructions per get_tuple")
    assert measured <= GET_BOUND, (
        f"{measured:,} bytecode instructions in langgraph_durable's get_tuple, over the "
        f"bound of {GET_BOUND:,} by {measured - GET_BOUND:,} ({measured / GET_BOUND - 1:.0%})"
    )
