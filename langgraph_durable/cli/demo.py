"""Crash-and-resume demo: a research agent is SIGKILLed in the middle of its tool calls.

A scripted chat model (no network, no API key) drives a ToolNode with side-effecting tools:
a card charge (an idempotent payment API, policy ``retry``), an e-mail (not idempotent,
policy ``escalate``) and a report written to a file, plus a read-only search. A worker
process runs the agent and is killed with SIGKILL right after the charge went through,
while the e-mail is still being sent. A fresh worker resumes from Redis: recorded results
come back from the ledger, the e-mail whose outcome is unknown is escalated to an
"operator" (who checks the outbox), and the run completes. The verdict checks that every
side effect happened exactly once.

    langgraph-durable demo [--damage] [--json]

The workers get the Redis URL (and any signing keys) through their environment, never on
their command line, where every user of the machine could read a password; what the demo
prints shows the URL with its password masked. The world the tools touch is a temporary
directory, removed when the demo ends, whether it succeeded or failed (a failed worker's
last line of stderr, kept there meanwhile, goes into the ``DemoFailed`` it raises).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
import uuid
from pathlib import Path
from typing import Any

from langchain_core.messages import HumanMessage
from langgraph.types import Command

from langgraph_durable.cli.demo_agent import (
    HANG_ENV,
    POLICIES,
    SCRIPT,
    SENDING,
    SIDE_EFFECTS,
    World,
    operator_answer,
    research_agent,
)
from langgraph_durable.core.fencing import this_worker
from langgraph_durable.core.keys import KeySchema
from langgraph_durable.core.ops import Command as RedisCommand
from langgraph_durable.core.ops import Plan
from langgraph_durable.core.redact import redact, redact_url
from langgraph_durable.ledger import ToolLedger
from langgraph_durable.saver import RedisSaver
from langgraph_durable.tools.embedded import DEMO_PREFIX, DEMO_TTL

# How run_demo hands its workers what must stay off their command lines.
URL_ENV = "REDIS_URL"
KEYS_ENV = "LGD_DEMO_SIGNING_KEYS"  # hex, comma-separated, newest first


class DemoFailed(RuntimeError):
    """A worker of the demo failed (or never got where the demo kills it)."""


def _last_line(log: Path) -> str:
    """The last non-empty line a worker wrote to its stderr (``log``), or ""."""
    try:
        lines = log.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    return next((line.strip() for line in reversed(lines) if line.strip()), "")


def _failed(what: str, log: Path) -> DemoFailed:
    """``what`` went wrong, and the last thing the worker said (its ``log``)."""
    said = _last_line(log)
    return DemoFailed(what + (f": {said}" if said else ""))


def worker(
    url: str,
    prefix: str,
    thread_id: str,
    directory: Path,
    delay: float,
    signing_key: list[bytes] | None = None,
) -> dict:
    """Run (or resume) the agent to the end; report what ran and what was replayed."""
    world = World(directory)
    ran: set[tuple[Any, str]] = set()
    escalations: list[dict[str, Any]] = []
    with RedisSaver.from_conn_string(
        url, key_prefix=prefix, signing_key=signing_key, ttl=DEMO_TTL
    ) as saver:
        ledger = ToolLedger(saver, policies=POLICIES)
        calls: dict[tuple[Any, str], str] = {}  # (step, tool_call_id) -> tool name

        def watch(request: Any, execute: Any) -> Any:
            call = (request.runtime.config["metadata"]["langgraph_step"], request.tool_call["id"])
            calls[call] = request.tool_call["name"]

            def run(req: Any) -> Any:
                ran.add(call)
                return execute(req)

            return ledger.wrap_tool_call(request, run)

        graph = research_agent(ledger, world, delay, wrap=watch).compile(checkpointer=saver)
        config = {"configurable": {"thread_id": thread_id}}
        started = time.monotonic()
        state = graph.get_state(config)
        report = saver.recovery_report(thread_id)
        value: Any = (
            {"messages": [HumanMessage(content="Research crash-safe agents, then report.")]}
            if not state.values
            else None
        )
        while True:
            out = graph.invoke(value, config, durability="sync")
            pending = graph.get_state(config).interrupts
            if not pending:
                break
            answers = {}
            for item in pending:
                answer = operator_answer(item.value, world)
                escalations.append({"call": item.value["name"], "answer": answer["action"]})
                answers[item.id] = answer
            value = Command(resume=answers)
        steps = [
            [snapshot.metadata["step"] + 1, list(snapshot.next)]
            for snapshot in graph.get_state_history(config)
            if snapshot.next and snapshot.metadata
        ][::-1]
        return {
            "steps": steps,
            "resumed_from_step": state.metadata.get("step") if state.metadata else None,
            "skipped_checkpoints": [
                {"checkpoint_id": s.checkpoint_id, "reason": s.reason} for s in report.skipped
            ]
            if report
            else [],
            "ran": [name for c, name in calls.items() if c in ran and name in SIDE_EFFECTS],
            "replayed": [
                name for c, name in calls.items() if c not in ran and name in SIDE_EFFECTS
            ],
            "escalations": escalations,
            "final": out["messages"][-1].content,
            "seconds": round(time.monotonic() - started, 3),
            "worker": this_worker(),  # the process that went on (the timeline names it)
        }


def damage_newest_checkpoint(
    url: str, prefix: str, thread_id: str, signing_key: list[bytes] | None = None
) -> str:
    """Flip one bit of the newest checkpoint record (what a torn write or bad disk does)."""
    with RedisSaver.from_conn_string(
        url, key_prefix=prefix, signing_key=signing_key, ttl=DEMO_TTL
    ) as saver:
        latest = saver.get_tuple({"configurable": {"thread_id": thread_id}})
        assert latest is not None
        checkpoint_id = latest.config["configurable"]["checkpoint_id"]
        saver.drive(_flip_last_bit(saver.keys, thread_id, checkpoint_id))
        return checkpoint_id


def _flip_last_bit(keys: KeySchema, thread_id: str, checkpoint_id: str) -> Plan[None]:
    """The demo's damage, as a plan like every other access to storage."""
    tk, field = keys.thread(thread_id), keys.checkpoint_member("", checkpoint_id)
    record = yield RedisCommand(("HGET", tk.cp, field))
    yield RedisCommand(("HSET", tk.cp, field, record[:-1] + bytes([record[-1] ^ 1])))


def worker_command(prefix: str, thread_id: str, directory: Path, delay: float) -> list[str]:
    """A worker's argv: nothing secret (see ``worker_env``)."""
    return [sys.executable, "-m", "langgraph_durable.cli.demo", "--worker", prefix, thread_id] + [
        str(directory),
        str(delay),
    ]


def worker_env(
    url: str, signing_key: list[bytes] | None, *, hang_mail: bool = False
) -> dict[str, str]:
    """A worker's environment: ours plus the URL and the signing keys."""
    env = {**os.environ, URL_ENV: url}
    env.pop(KEYS_ENV, None)
    env.pop(HANG_ENV, None)
    if hang_mail:
        env[HANG_ENV] = "1"
    if signing_key:
        env[KEYS_ENV] = ",".join(k.hex() for k in signing_key)
    return env


def start_and_kill(
    url: str,
    prefix: str,
    thread_id: str,
    directory: Path,
    delay: float,
    signing_key: list[bytes] | None = None,
) -> int:
    """Run the agent in a worker process and SIGKILL it once the card charge's result is
    recorded in the ledger while the e-mail sent alongside it hangs. Waits on those two
    states, never on time. Returns the killed worker's pid."""
    world = World(directory)
    log = directory / "worker-1.log"
    with log.open("wb") as stderr:
        first = subprocess.Popen(
            worker_command(prefix, thread_id, directory, delay),
            stdout=subprocess.PIPE,
            stderr=stderr,
            env=worker_env(url, signing_key, hang_mail=True),
        )
    try:
        with RedisSaver.from_conn_string(
            url, key_prefix=prefix, signing_key=signing_key, ttl=DEMO_TTL
        ) as saver:
            ledger = ToolLedger(saver, policies=POLICIES)

            def charge_recorded() -> bool:
                return any(
                    e.name == "charge_card" and e.state == "result"
                    for e in ledger.entries(thread_id)
                )

            deadline = time.monotonic() + 120  # a safety net only: a stuck worker, not timing
            while not (world.marked(SENDING) and charge_recorded()):
                if (code := first.poll()) is not None:
                    raise _failed(f"the first worker exited with code {code} before the kill", log)
                if time.monotonic() > deadline:
                    raise _failed("the first worker did not reach the charge and the e-mail", log)
                time.sleep(0.01)
    finally:  # killed however this ends: left alone, it would hang on its e-mail forever
        if first.poll() is None:
            first.send_signal(signal.SIGKILL)
        first.wait()
        if first.stdout is not None:
            first.stdout.close()
    return first.pid


def run_demo(
    url: str,
    *,
    prefix: str = DEMO_PREFIX,
    damage: bool = False,
    delay: float = 0.5,
    emit: Any = print,
    signing_key: list[bytes] | None = None,
) -> dict[str, Any]:
    """The whole demo; ``emit`` gets each line of the timeline. Returns the verdict;
    raises ``DemoFailed`` if a worker fails. Its temporary directory is removed either way."""
    thread_id = f"demo-{uuid.uuid4().hex[:8]}"
    directory = Path(tempfile.mkdtemp(prefix="lgd-demo-"))
    try:
        return _run(url, prefix, damage, delay, emit, signing_key, thread_id, directory)
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def _run(
    url: str,
    prefix: str,
    damage: bool,
    delay: float,
    emit: Any,
    signing_key: list[bytes] | None,
    thread_id: str,
    directory: Path,
) -> dict[str, Any]:
    world = World(directory)
    emit(f"Redis {redact_url(url)}  key prefix {prefix}  thread {thread_id}")
    pid = start_and_kill(url, prefix, thread_id, directory, delay, signing_key)
    killed_at = time.monotonic()
    before = world.effects()
    emit(
        f"worker {pid} SIGKILLed mid-step; effects so far: " + ", ".join(e["tool"] for e in before)
    )
    damaged = damage_newest_checkpoint(url, prefix, thread_id, signing_key) if damage else None
    if damaged:
        emit(f"damaged the newest checkpoint {damaged} (one bit flipped)")
    log = directory / "worker-2.log"
    with log.open("wb") as stderr:
        second = subprocess.run(
            worker_command(prefix, thread_id, directory, delay),
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            check=False,
            env=worker_env(url, signing_key),
        )
    if second.returncode != 0:
        raise _failed(f"the resuming worker exited with code {second.returncode}", log)
    report = json.loads(second.stdout.strip().splitlines()[-1])
    recovery = time.monotonic() - killed_at
    for skipped in report["skipped_checkpoints"]:
        emit(f"skipped damaged checkpoint {skipped['checkpoint_id']}: {skipped['reason']}")
    resumed = report["resumed_from_step"]
    # The crash interrupted the step after the newest checkpoint; with --damage the read
    # fell back past the damaged ones, one step each, and resumed from an older one.
    interrupted = resumed + 1 + len(report["skipped_checkpoints"])
    emit(f"fresh worker resumed from the checkpoint of step {resumed}")
    emit(
        "  steps: "
        + "  ".join(
            f"{n}:{'+'.join(nodes)}{'*' if n == interrupted else ''}"
            for n, nodes in report["steps"]
        )
        + "   (* the step the crash interrupted)"
    )
    emit(f"  replayed from the ledger (not called again): {', '.join(report['replayed']) or '-'}")
    for e in report["escalations"]:
        emit(f"  unknown outcome escalated: {e['call']} -> operator answered {e['answer']}")
    emit(f"  tools that ran after the crash: {', '.join(report['ran']) or '-'}")
    emit(
        f"  finished {recovery:.2f}s after the kill ({report['seconds']:.2f}s of it resuming, "
        f"the rest starting a Python process): {report['final']!r}"
    )
    effects = world.effects()
    keys = [e["key"] for e in effects]
    planned = sum(1 for turn in SCRIPT for c in turn if c["name"] in SIDE_EFFECTS)
    duplicates = sorted({k for k in keys if keys.count(k) > 1})
    exactly_once = not duplicates and len(effects) == planned and None not in keys
    emit("timeline of side effects: " + " -> ".join(e["tool"] for e in effects))
    verdict = {
        "thread_id": thread_id,
        "exactly_once": exactly_once,
        "side_effects": len(effects),
        "planned": planned,
        "duplicates": duplicates,
        "recovery_seconds": round(recovery, 3),
        "damaged_checkpoint": damaged,
        "interrupted_step": interrupted,
        **report,
    }
    emit(
        "VERDICT: "
        + (
            f"OK: every side effect happened exactly once ({len(effects)} of {planned})"
            if exactly_once
            else f"FAILED: {len(effects)} effects for {planned} calls, duplicates {duplicates}"
        )
    )
    return verdict


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["--worker"]:
        prefix, thread_id, directory, delay = args[1:5]
        keys = os.environ.get(KEYS_ENV)
        signing_key = [bytes.fromhex(k) for k in keys.split(",")] if keys else None
        try:
            report = worker(
                os.environ[URL_ENV], prefix, thread_id, Path(directory), float(delay), signing_key
            )
        except Exception as exc:  # noqa: BLE001 - the traceback, then what run_demo reports
            traceback.print_exc()
            said = next(iter(str(exc).splitlines()), "")
            print(redact(f"{type(exc).__name__}: {said}", os.environ[URL_ENV]), file=sys.stderr)
            return 1
        print(json.dumps(report))
        return 0
    print("run the demo with: langgraph-durable demo", file=sys.stderr)  # this is its worker
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
