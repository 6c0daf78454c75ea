"""Runs the scenario matrix's cells (tests/crash/test_scenario_matrix.py) and writes one
JSON line per cell: its coordinates, "safe" or "unsafe" and why, the questions asked.

    python -m tests.workers.matrix_runner URL PREFIX DIR CELLS_JSON LANES

Imports LangGraph once, then forks: every phase of a cell is a child process of its own
(a new process: nothing of the one before is in memory), and the first phase of a cell
that crashes SIGKILLs itself at its point (after the Nth effect, in the middle of the
parallel tool calls, or right after the model's answer was journaled). LANES processes
run the cells side by side, each cell on a thread of its own under PREFIX.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import traceback
import uuid
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.types import Command, RetryPolicy

from langgraph_durable import RedisSaver, ToolLedger
from tests.helpers.matrix import (
    POLICIES,
    EffectLog,
    MatrixModel,
    build,
    human,
    make_tools,
    sends_graph,
    verdict,
)

WAYS_ANSWERING = {"answered": "A", "reanswered": "A", "resend": "A"}


class TicketDown(Exception):
    """A transient error: the ticket API is down (a RetryPolicy retries it)."""


def run_cell(url: str, prefix: str, folder: str, cell: dict[str, Any]) -> dict[str, Any]:
    log = EffectLog(os.path.join(folder, f"{cell['id']}.effects"))
    shared = os.path.join(folder, f"{cell['id']}.json")
    if os.path.exists(shared):
        os.remove(shared)
    phase(url, prefix, cell, log, shared, 1)
    keys_before = {x["key"] for x in log.lines() if x["kind"] == "effect"}
    count_before = sum(1 for x in log.lines() if x["kind"] == "effect")
    phase(url, prefix, cell, log, shared, 2)
    with open(shared) as f:
        final = json.load(f)
    final["effects_before"] = count_before
    answer, why = verdict(cell["way"], log, final, keys_before)
    asked = [x["type"] for x in log.lines() if x["kind"] == "asked"]
    return {**cell, "verdict": answer, "why": why, "asked": asked}


def phase(url: str, prefix: str, cell: dict[str, Any], log: EffectLog, shared: str, n: int) -> None:
    pid = os.fork()
    if pid == 0:  # the child: a new process
        code = 0
        try:
            child(url, prefix, cell, log, shared, n)
        except BaseException:  # noqa: BLE001 - reported through the shared file
            failure = traceback.format_exc()[-3000:]
            if n == 2:
                with open(shared, "w") as f:
                    json.dump({"done": False, "error": failure}, f)
            else:
                with open(shared + ".phase1-error", "w") as f:
                    f.write(failure)
            code = 1
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    if (
        n == 1
        and cell.get("kill")
        and not (os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL)
    ):
        why = ""
        if os.path.exists(shared + ".phase1-error"):
            with open(shared + ".phase1-error") as f:
                why = f.read()
        raise RuntimeError(f"cell {cell['id']}: phase 1 was not killed ({status}): {why}")


def child(url: str, prefix: str, cell: dict[str, Any], log: EffectLog, shared: str, n: int) -> None:
    if os.environ.get("LGD_DEBUG_LOG"):  # the ledger's decisions, for a failing cell's reader
        import logging

        path = f"{os.environ['LGD_DEBUG_LOG']}.{cell['id']}.{n}"
        logging.basicConfig(filename=path, level=logging.DEBUG)
    seen: dict[str, int] = {}
    ticket_down = [cell["way"] == "retry_policy"]

    def hook(point: str) -> None:
        seen[point] = seen.get(point, 0) + 1
        if point == "ticket_start" and ticket_down[0]:
            ticket_down[0] = False
            raise TicketDown("the ticket API is down")
        kill = cell.get("kill")
        if n == 1 and kill and point == kill[0] and seen[point] == kill[1]:
            os.kill(os.getpid(), signal.SIGKILL)

    thread = cell["id"]
    config: dict[str, Any] = {"configurable": {"thread_id": thread}}
    with RedisSaver.from_conn_string(url, key_prefix=prefix) as saver:
        ledger = ToolLedger(saver, policies=POLICIES)
        if cell["way"] == "sends":
            graph = sends_graph(ledger, log, hook, saver)
            start: Any = {"sent": []}
        else:
            model = MatrixModel(random=cell["model"].endswith("random"))
            retry = RetryPolicy(max_attempts=3, retry_on=TicketDown, initial_interval=0.01)
            graph = build(
                cell["shape"],
                ledger,
                model,
                make_tools(log, hook),
                hook,
                journal=cell["model"].startswith("journaled"),
                gated=cell["way"] in WAYS_ANSWERING,
                saver=saver,
                retry_policy=retry if cell["way"] == "retry_policy" else None,
            )
            start = {"messages": [HumanMessage("T1")]}
        run = Runner(graph, cell, log)
        if n == 1:
            first(run, config, start, shared)
        else:
            second(run, saver, config, start, shared)


class Runner:
    """Runs a graph until it finishes, answering every question as ``human`` would."""

    def __init__(self, graph: Any, cell: dict[str, Any], log: EffectLog) -> None:
        self.graph, self.cell, self.log = graph, cell, log
        self.gate = WAYS_ANSWERING.get(cell["way"], "A")
        # run ids are the cell's own: a rollback deletes its run's checkpoints in every
        # thread of the prefix, and the cells share one
        self.first_run = f"R1-{cell['id']}"
        self.run_id: str | None = (
            self.first_run if cell["way"] in ("server_retry", "rollback") else None
        )

    def configured(self, config: dict[str, Any]) -> dict[str, Any]:
        if self.run_id is None:
            return config
        conf = {**config["configurable"], "run_id": self.run_id}
        return {**config, "configurable": conf, "metadata": {"run_id": self.run_id}}

    def drive(self, payload: Any, config: dict[str, Any], limit: int = 10) -> None:
        for _ in range(limit):
            out = self.graph.invoke(
                payload, self.configured(config), durability=self.cell["durability"]
            )
            # a run addressed to a checkpoint goes on from the thread's head afterwards
            config = {"configurable": {"thread_id": config["configurable"]["thread_id"]}}
            asked = out.get("__interrupt__") if isinstance(out, dict) else None
            if not asked:
                return
            payload = Command(resume={i.id: human(i.value, self.log, self.gate) for i in asked})
            if self.run_id is not None:  # the server answers an interrupt in a new run
                self.run_id = f"answer-{uuid.uuid4().hex[:6]}"
        raise RuntimeError("still asking after 10 answers")

    def go_on(self, config: dict[str, Any], start: Any) -> None:
        """Whatever the thread needs next: answers, a resume, or the input (sent again)."""
        state = self.graph.get_state(config)
        if state.interrupts:
            payload: Any = Command(
                resume={i.id: human(i.value, self.log, self.gate) for i in state.interrupts}
            )
        elif state.next or state.tasks:
            payload = None
        elif not state.values:
            payload = start
        else:
            return
        self.drive(payload, config)


def first(run: Runner, config: dict[str, Any], start: Any, shared: str) -> None:
    way = run.cell["way"]
    saved: dict[str, Any] = {}
    if way == "update_state":
        run.drive(start, config)
        saved["turn_one"] = run.graph.get_state(config).config
        run.drive({"messages": [HumanMessage("T2")]}, config)
    elif way == "resend":
        run.graph.invoke(start, config, durability=run.cell["durability"])
        saved["asked_at"] = run.graph.get_state(config).config
        run.drive(Command(resume="A"), config)
    else:
        run.drive(start, config)
    with open(shared, "w") as f:
        json.dump(saved, f)


def second(run: Runner, saver: RedisSaver, config: dict[str, Any], start: Any, shared: str) -> None:
    way = run.cell["way"]
    saved: dict[str, Any] = {}
    if os.path.exists(shared):  # a killed first phase left nothing
        with open(shared) as f:
            saved = json.load(f)
    if way == "reanswered":
        run.gate = "B"
    if way == "server_retry":
        run.run_id = run.first_run  # the server retries the run under its id
    if way == "rollback":
        saver.delete_for_runs([run.first_run])
        run.run_id = f"R2-{run.cell['id']}"
    if way == "copy":
        saver.copy_thread(
            config["configurable"]["thread_id"], config["configurable"]["thread_id"] + "-copy"
        )
        config = {"configurable": {"thread_id": config["configurable"]["thread_id"] + "-copy"}}
    if way == "fork":
        history = list(run.graph.get_state_history(config))
        before = [s for s in history if s.next and not s.values.get("messages", [None])[1:]]
        run.drive(None, before[-1].config)
    elif way == "update_state":
        run.graph.update_state(
            saved["turn_one"], {"messages": [HumanMessage("T3")]}, as_node="__input__"
        )
        run.drive(None, config)
    elif way == "new_input":
        run.drive({"messages": [HumanMessage("T2")]}, config)
    elif way == "resend":
        run.drive(Command(resume="A"), saved["asked_at"])
    for _ in range(5):
        run.go_on(config, start)
    state = run.graph.get_state(config)
    final: dict[str, Any] = {"done": not state.next and not state.interrupts}
    final["results"] = results_of(state.values.get("messages", []))
    with open(shared, "w") as f:
        json.dump(final, f)


def results_of(messages: list[Any]) -> list[tuple[str, str]]:
    """(the call's tag, its result) for every call of every AI message, paired with the
    tool messages that follow that message (deterministic models reuse call ids)."""
    out = []
    for i, m in enumerate(messages):
        if not isinstance(m, AIMessage):
            continue
        after = []
        for later in messages[i + 1 :]:
            if not isinstance(later, ToolMessage):
                break
            after.append(later)
        answers = {t.tool_call_id: t.content for t in after}
        out += [
            (c["args"].get("tag"), answers[c["id"]]) for c in m.tool_calls if c["id"] in answers
        ]
    return out


def main(argv: list[str]) -> None:
    url, prefix, folder, cells_path, lanes = argv[0], argv[1], argv[2], argv[3], int(argv[4])
    with open(cells_path) as f:
        cells = json.load(f)
    children = []
    for lane in range(lanes):
        pid = os.fork()
        if pid == 0:
            out = os.path.join(folder, f"results-{lane}.jsonl")
            with open(out, "a") as results:
                for cell in cells[lane::lanes]:
                    try:
                        line = run_cell(url, prefix, folder, cell)
                    except Exception:  # noqa: BLE001 - the harness failed, not the cell
                        line = {
                            **cell,
                            "verdict": "error",
                            "why": [traceback.format_exc()[-1500:]],
                            "asked": [],
                        }
                    results.write(json.dumps(line) + "\n")
                    results.flush()
            os._exit(0)
        children.append(pid)
    for pid in children:
        os.waitpid(pid, 0)


if __name__ == "__main__":
    main(sys.argv[1:])
