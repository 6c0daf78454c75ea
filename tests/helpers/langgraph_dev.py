"""A real ``langgraph dev`` server for tests: started, killed, restarted, driven over HTTP.

It serves ``tests/helpers/served_agent.py`` with ``langgraph_durable.server.checkpointer``
from a working directory of its own (``langgraph.json``, the in-memory runtime's
``.langgraph_api/`` store, the log, the agent's side effects and gates).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import httpx

from tests.helpers.servers import free_port

AGENT = Path(__file__).with_name("served_agent.py")
LANGGRAPH = Path(sys.executable).with_name("langgraph")
# Safety nets only: every wait ends as soon as what it waits for happens.
START_TIMEOUT = 120.0
WAIT_TIMEOUT = 60.0
T = TypeVar("T")


def until(what: str, probe: Callable[[], T | None], timeout: float = WAIT_TIMEOUT) -> T:
    """Poll ``probe`` until it returns something other than None/False; fail naming
    ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        found = probe()
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


class DevServer:
    """``langgraph dev`` in ``workdir`` with ``env`` (REDIS_URL, LGD_*) added to ours,
    its ``langgraph.json`` naming ``checkpointer`` as the factory."""

    def __init__(
        self,
        workdir: Path,
        env: Mapping[str, str],
        checkpointer: str = "langgraph_durable.server.checkpointer",
    ) -> None:
        self.workdir = workdir
        self.effects_dir = workdir / "effects"
        self.effects_dir.mkdir(parents=True, exist_ok=True)
        (workdir / "langgraph.json").write_text(
            json.dumps(
                {
                    "dependencies": ["."],
                    "graphs": {"agent": f"{AGENT}:graph"},
                    "checkpointer": {"path": checkpointer},
                }
            )
        )
        self.env = {
            **os.environ,
            **env,
            "LGD_TEST_DIR": str(self.effects_dir),
            "HOME": str(workdir),  # nothing of the CLI's lands in the real home
            "LANGGRAPH_CLI_NO_ANALYTICS": "1",
            "LANGSMITH_TRACING": "false",
            "LANGCHAIN_TRACING_V2": "false",
        }
        self.proc: subprocess.Popen[bytes] | None = None
        self.http = httpx.Client(timeout=WAIT_TIMEOUT)
        self.url = ""

    def start(self) -> None:
        """Start the server and return once it answers ``/ok``; another port is tried if
        the one picked was taken before the server bound it."""
        for _ in range(5):
            port = free_port()
            log = open(self.workdir / "server.log", "ab")  # noqa: SIM115 - the child's
            with log:
                self.proc = subprocess.Popen(
                    [str(LANGGRAPH), "dev", "--port", str(port), "--no-browser", "--no-reload"],
                    cwd=self.workdir,
                    env=self.env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )
            self.url = f"http://127.0.0.1:{port}"
            if self._answers():
                return
            if "address already in use" not in self.log().lower():
                break
        raise RuntimeError(f"langgraph dev did not start; its log ends:\n{self.log()[-4000:]}")

    def _answers(self) -> bool:
        assert self.proc is not None
        deadline = time.monotonic() + START_TIMEOUT
        while self.proc.poll() is None and time.monotonic() < deadline:
            try:
                if self.http.get(f"{self.url}/ok", timeout=2).status_code == 200:
                    return True
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        return False

    def kill(self) -> None:
        """SIGKILL: the server dies mid-run, as in a crash."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)

    def stop(self) -> None:
        """Terminate the server (kill it if it does not exit)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.kill()
        self.http.close()

    def log(self) -> str:
        return (self.workdir / "server.log").read_text(errors="replace")

    # -- the HTTP API ----------------------------------------------------------------
    def call(self, method: str, path: str, body: Any = None, *, status: int = 200) -> Any:
        reply = self.http.request(method, self.url + path, json=body)
        assert reply.status_code == status, f"{method} {path}: {reply.status_code} {reply.text}"
        return reply.json() if reply.content else None

    def new_thread(self, thread_id: str | None = None) -> str:
        body = {"thread_id": thread_id, "if_exists": "do_nothing"} if thread_id else {}
        return str(self.call("POST", "/threads", body)["thread_id"])

    def wait(self, thread_id: str, **body: Any) -> Any:
        """A run to its end (``input=``, ``command=``, ``multitask_strategy=``...)."""
        return self.call(
            "POST", f"/threads/{thread_id}/runs/wait", {"assistant_id": "agent", **body}
        )

    def start_run(self, thread_id: str, **body: Any) -> str:
        """A background run; its id."""
        run = self.call("POST", f"/threads/{thread_id}/runs", {"assistant_id": "agent", **body})
        return str(run["run_id"])

    def state(self, thread_id: str) -> Any:
        return self.call("GET", f"/threads/{thread_id}/state")

    # -- the agent's side effects ----------------------------------------------------
    def effects(self) -> list[str]:
        path = self.effects_dir / "effects"
        return path.read_text().splitlines() if path.exists() else []

    def gate(self, amount: int) -> Path:
        """Make ``charge(amount)`` block until ``release``."""
        gate = self.effects_dir / f"gate-{amount}"
        os.mkfifo(gate)
        return gate

    def started(self, amount: int) -> bool:
        return (self.effects_dir / f"started-{amount}").exists()


def release(gate: Path) -> None:
    """Let the ``charge`` blocked on ``gate`` go on. Non-blocking: with no reader waiting
    (the charge is not blocked there) this fails at once instead of hanging."""
    os.close(os.open(gate, os.O_WRONLY | os.O_NONBLOCK))


def say(text: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}
