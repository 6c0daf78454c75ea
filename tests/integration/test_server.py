"""LangGraph Server on langgraph-durable: ``langgraph_durable.server.checkpointer`` and a
``ToolLedger()`` in a served graph, driven through a real ``langgraph dev``'s HTTP API.

After each step the test reads what Redis holds: the thread's keys, its checkpoints (and
which run wrote them), its ledger entries. The served agent is
``tests/helpers/served_agent.py``; its side effects are counted in a file.
"""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from langgraph_durable import AsyncRedisSaver, ConfigurationError, RedisSaver, ToolLedger
from langgraph_durable.server import checkpointer
from langgraph_durable.tools.settings import saver_options
from tests.helpers.langgraph_dev import LANGGRAPH, DevServer, release, say, until
from tests.helpers.redis_keys import delete_prefix, glob_escape

pytest.importorskip("langgraph_api", reason="needs langgraph-cli[inmem] (the test extra)")
if not LANGGRAPH.exists():
    pytest.skip("needs the langgraph command of langgraph-cli[inmem]", allow_module_level=True)

SIGNING_KEY = "served-signing-key-0123456789"
TTL = 3600


class Served:
    """A ``langgraph dev`` and a reader of the Redis it writes to."""

    def __init__(self, server: DevServer, client: redis.Redis, saver: RedisSaver) -> None:
        self.server = server
        self.client = client
        self.saver = saver
        self.ledger = ToolLedger(saver)  # reads entries; the served graph has its own

    def keys_of(self, thread_id: str) -> set[bytes]:
        """Every key of the prefix that names the thread (its own keys, and run sets)."""
        prefix = glob_escape(self.saver.key_prefix)
        own = set(self.client.scan_iter(match=f"{prefix}:{{{glob_escape(thread_id)}}}*"))
        in_runs = {
            key
            for key in self.client.scan_iter(match=f"{prefix}:run:*")
            if self.client.sismember(key, thread_id)
        }
        return own | in_runs

    def run_ids(self, thread_id: str) -> set[str]:
        """The runs whose checkpoints Redis holds for the thread."""
        config = {"configurable": {"thread_id": thread_id}}
        return {str(cp.metadata.get("run_id")) for cp in self.saver.list(config)}

    def entries(self, thread_id: str) -> list[tuple[str, Any, str]]:
        return [(e.name, e.args, e.state) for e in self.ledger.entries(thread_id)]


@pytest.fixture
def serve(redis_url: str, tmp_path: Path) -> Iterator[Any]:
    """``serve()``: a started ``langgraph dev`` on the test's Redis, under a key prefix of
    its own, signed and with a ttl; every server is stopped and the prefix deleted."""
    prefix = f"lgdtest-{uuid.uuid4().hex[:12]}"
    env = {
        "REDIS_URL": redis_url,
        "LGD_KEY_PREFIX": prefix,
        "LGD_SIGNING_KEY": SIGNING_KEY,
        "LGD_TTL": str(TTL),
    }
    client = redis.Redis.from_url(redis_url)
    started: list[DevServer] = []

    def serve(checkpointer: str = "langgraph_durable.server.checkpointer") -> Served:
        server = DevServer(tmp_path / "served", env, checkpointer)
        started.append(server)
        server.start()
        return Served(server, client, saver)

    with RedisSaver.from_conn_string(
        redis_url, key_prefix=prefix, signing_key=SIGNING_KEY
    ) as saver:
        try:
            yield serve
        finally:
            for server in started:
                server.stop()
            delete_prefix(client, prefix)
            client.close()


def test_a_served_ledger_records_in_the_servers_checkpointer(serve: Any) -> None:
    served = serve()
    api = served.server
    tid = api.new_thread()
    out = api.wait(tid, input=say("charge 5"))
    assert out["messages"][-1]["content"] == "done: charged 5"
    assert api.effects() == ["charge 5"]
    log = api.log()
    assert "Using custom checkpointer: AsyncRedisSaver" in log
    assert "Custom checkpointer missing" not in log  # aprune, acopy_thread... all there
    assert "does not retry" not in log  # the factory's client retries
    # the ledger wrote in the thread's keys through the server's saver: no second saver
    assert served.entries(tid) == [("charge", {"amount": 5}, "result")]
    tk = served.saver.keys.thread(tid)
    assert {tk.cp.encode(), tk.cps.encode(), tk.lg.encode()} <= served.keys_of(tid)
    assert 0 < served.client.ttl(tk.lg) <= TTL  # LGD_TTL
    unsigned = RedisSaver(served.client, key_prefix=served.saver.key_prefix)
    (unverified,) = ToolLedger(unsigned).entries(tid)  # signed with LGD_SIGNING_KEY
    assert unverified.damage is not None

    # an interrupt inside a ledger-guarded tool, resumed with a Command
    out = api.wait(tid, input=say("refund 3"))
    (asked,) = out["__interrupt__"]
    assert asked["value"] == {"approve_refund": 3}
    assert served.entries(tid)[-1] == ("refund", {"amount": 3}, "interrupted")
    out = api.wait(tid, command={"resume": "yes"})
    assert out["messages"][-1]["content"] == "done: refunded 3"
    assert api.effects() == ["charge 5", "refund 3"]
    assert served.entries(tid)[-1] == ("refund", {"amount": 3}, "result")

    # copy: every record re-sealed under the copy's id, the ledger too
    copy = api.call("POST", f"/threads/{tid}/copy")["thread_id"]
    assert served.entries(copy) == served.entries(tid)
    assert api.state(copy)["values"] == api.state(tid)["values"]

    # delete: nothing of the thread is left in Redis; the copy is untouched
    api.call("DELETE", f"/threads/{tid}", status=204)
    assert served.keys_of(tid) == set()
    assert len(served.entries(copy)) == 2
    assert api.wait(copy, input=say("charge 9"))["messages"][-1]["content"] == "done: charged 9"
    assert api.effects() == ["charge 5", "refund 3", "charge 9"]


def test_rollback_deletes_the_cancelled_runs_checkpoints_and_voids_its_ledger(serve: Any) -> None:
    """Double-texting with ``multitask_strategy="rollback"``: the next request is a new
    execution, never answered from the cancelled run nor asked about it; the cancelled
    run's call that may have taken effect stays visible to operators, with its run."""
    served = serve("langgraph_durable.server:checkpointer")  # the other spelling works too
    api = served.server
    tid = api.new_thread()
    api.wait(tid, input=say("charge 60"))
    first = served.run_ids(tid)
    gate = api.gate(61)
    cancelled = api.start_run(tid, input=say("charge 61"))
    until("the charge of 61 to start", lambda: api.started(61))
    assert served.run_ids(tid) == first | {cancelled}
    assert served.entries(tid)[-1] == ("charge", {"amount": 61}, "intent")

    out = api.wait(tid, input=say("charge 62"), multitask_strategy="rollback")
    # adelete_for_runs took the cancelled run's checkpoints; the server forgot the run
    after = served.run_ids(tid)
    assert cancelled not in after and first < after  # the new run's are there
    api.call("GET", f"/threads/{tid}/runs/{cancelled}", status=404)
    # the new request's call at the same place is a new call: it ran, nothing was asked
    assert "__interrupt__" not in out
    assert out["messages"][-1]["content"] == "done: charged 62"
    # ...but the charge the cancelled run had started may have taken effect: operators
    # see it, with its run, until one of them drops it
    (waiting,) = served.ledger.escalations([tid])
    assert (waiting.kind, waiting.args, waiting.entry.run_id) == (
        "rolled_back",
        {"amount": 61},
        cancelled,
    )

    release(gate)  # the cancelled run's tool call was still blocked: it completes now
    until("the cancelled charge to finish", lambda: "charge 61" in api.effects())
    assert sorted(api.effects()) == ["charge 60", "charge 61", "charge 62"]
    # nobody awaited it any more: the ledger still cannot know it took effect
    assert ("charge", {"amount": 61}, "intent") in served.entries(tid)
    served.ledger.drop(tid, str(waiting.idempotency_key), reason="refunded", by="ops")
    assert served.ledger.escalations([tid]) == []
    # the thread goes on: a later run is not answered from the rolled-back one either
    out = api.wait(tid, input=say("charge 63"))
    assert out["messages"][-1]["content"] == "done: charged 63"
    assert api.effects().count("charge 61") == 1


def test_after_a_server_crash_the_server_retries_the_run_and_the_ledger_asks(
    serve: Any,
) -> None:
    served = serve()
    api = served.server
    tid = api.new_thread()
    gate = api.gate(8)
    api.start_run(tid, input=say("charge 8"))
    until("the charge of 8 to start", lambda: api.started(8))
    # the dev server saves its runs every 10 s: wait until the running run is saved
    store = api.workdir / ".langgraph_api" / ".langgraph_ops.pckl"
    seen = store.stat().st_mtime if store.exists() else 0.0
    until("the server's store to be saved", lambda: store.exists() and store.stat().st_mtime > seen)
    api.kill()
    gate.unlink()  # a charge run again would not block: it would show as a second effect

    restarted = serve()  # same working directory, same Redis
    api = restarted.server
    until("the retried run to stop at the question", lambda: _status(api, tid) == "interrupted")
    (task,) = api.state(tid)["tasks"]
    (asked,) = task["interrupts"]
    assert asked["value"]["type"] == "tool_outcome_unknown"
    assert asked["value"]["args"] == {"amount": 8}
    assert api.effects() == []  # the killed charge never got past its gate
    out = api.wait(tid, command={"resume": {"action": "retry"}})
    assert out["messages"][-1]["content"] == "done: charged 8"
    assert api.effects() == ["charge 8"]
    (entry,) = restarted.ledger.entries(tid)
    assert (entry.state, entry.attempts, entry.resolution) == ("result", 2, "retry")


def test_after_losing_the_servers_store_the_thread_is_taken_up_again(serve: Any) -> None:
    served = serve()
    api = served.server
    tid = api.new_thread()
    api.gate(4)
    api.start_run(tid, input=say("charge 4"))
    until("the charge of 4 to start", lambda: api.started(4))
    api.kill()
    shutil.rmtree(api.workdir / ".langgraph_api")  # a new container: threads and runs gone
    (api.effects_dir / "gate-4").unlink()

    restarted = serve()
    api = restarted.server
    api.call("GET", f"/threads/{tid}", status=404)
    assert api.new_thread(tid) == tid  # the same id: its checkpoints are in Redis
    out = api.wait(tid, input=None)  # resume from the last checkpoint
    (asked,) = out["__interrupt__"]
    assert asked["value"]["type"] == "tool_outcome_unknown"
    answer = {"action": "skip", "result": "charged 4 (checked with the bank)"}
    out = api.wait(tid, command={"resume": answer})
    assert out["messages"][-1]["content"] == "done: charged 4 (checked with the bank)"
    assert api.effects() == []  # skipped: a human said it had taken effect


def _status(api: DevServer, thread_id: str) -> str | None:
    reply = api.http.get(f"{api.url}/threads/{thread_id}")
    return reply.json().get("status") if reply.status_code == 200 else None


# -- the factory, without a server --------------------------------------------------------


async def test_the_factory_reads_its_settings_from_the_environment(
    redis_url: str, key_prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REDIS_URL", redis_url)
    monkeypatch.setenv("LGD_KEY_PREFIX", key_prefix)
    monkeypatch.setenv("LGD_TTL", "120")
    monkeypatch.setenv("LGD_SIGNING_KEY", f"{SIGNING_KEY}, old-{SIGNING_KEY}")
    async with checkpointer() as saver:
        assert isinstance(saver, AsyncRedisSaver)
        assert (saver.key_prefix, saver.ttl) == (key_prefix, 120)
        config = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
        await saver.aput(config, _checkpoint(), {}, {})
        assert await saver.aget_tuple(config) is not None
    with RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix) as unsigned:
        assert not unsigned.verify("t").ok  # signed with the key from the environment


@pytest.mark.parametrize(
    "name, value, message",
    [
        ("LGD_TTL", "soon", "LGD_TTL must be a positive integer of seconds, got 'soon'"),
        ("LGD_TTL", "-5", "LGD_TTL must be a positive integer"),
        ("LGD_KEY_PREFIX", "a{b", "LGD_KEY_PREFIX: key_prefix 'a{b' must not contain"),
        ("LGD_SIGNING_KEY", "short-secret", "key 1 from LGD_SIGNING_KEY is 12 bytes"),
        ("LGD_CLUSTER", "maybe", "LGD_CLUSTER must be 1/true/yes or 0/false/no"),
    ],
)
def test_a_bad_setting_is_named(name: str, value: str, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message.replace("{", r"\{")) as raised:
        saver_options({name: value})
    if name == "LGD_SIGNING_KEY":
        assert value not in str(raised.value)  # a key is never shown


@pytest.mark.parametrize(
    "url, message",
    [
        ("localhost:6379", "must specify one of the following schemes"),
        ("redis://:hunter2@localhost:port/0", "Port could not be cast"),
        ("redis://localhost:99999999/0", "Port out of range"),
        ("redis://localhost/0?socket_timeout=soon", "Invalid value for 'socket_timeout'"),
        ("redis+sentinel://localhost:26379/mymaster?x=1", "takes no query options"),
    ],
)
async def test_a_malformed_redis_url_is_named(
    url: str, message: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REDIS_URL", url)
    with pytest.raises(ConfigurationError, match=f"^REDIS_URL: .*{message}") as raised:
        async with checkpointer():
            pass
    assert "hunter2" not in str(raised.value)  # a password is never shown


async def test_a_malformed_url_given_to_the_saver_is_a_configuration_error() -> None:
    with (
        pytest.raises(ConfigurationError, match="bad Redis URL redis://localhost:port"),
        RedisSaver.from_conn_string("redis://localhost:port"),
    ):
        pass
    with pytest.raises(ConfigurationError, match="bad Redis URL redis://localhost:port"):
        async with AsyncRedisSaver.from_conn_string("redis://localhost:port"):
            pass


def test_prune_takes_the_servers_name_for_delete(saver: RedisSaver) -> None:
    config = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    saver.put(config, _checkpoint(), {}, {})
    saver.prune(["t"], strategy="delete_all")  # what the server's thread TTL sweep sends
    assert saver.get_tuple(config) is None


def _checkpoint() -> Any:
    from langgraph.checkpoint.base import empty_checkpoint

    return empty_checkpoint()
