"""Operations: client options through from_conn_string, TLS (rediss://) with a self-signed
CA, the minimal ACL of docs/operations/security.md, sync calls on an AsyncRedisSaver whose
loop is not running, and typed errors for inputs Redis cannot store.

Every server here is a private redis-server started for the test (TLS, ACL users), so the
shared one is never reconfigured.
"""

from __future__ import annotations

import asyncio
import re
import shutil
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
import redis.asyncio
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.types import Command
from redis.backoff import NoBackoff
from redis.retry import Retry
from typing_extensions import TypedDict

from langgraph_durable import (
    AsyncRedisSaver,
    ConfigurationError,
    EventLoopError,
    InvalidConfigError,
    RedisSaver,
    ToolLedger,
    ValueTooLargeError,
)
from langgraph_durable.core.inputs import MAX_RECORD_BYTES, record_size
from tests.helpers.graphs import chain, react_graph, react_input
from tests.helpers.redis_keys import flip_last_bit
from tests.helpers.servers import Server, make_tls_files, start_server

SECURITY = Path(__file__).resolve().parents[2] / "docs" / "operations" / "security.md"


def written(client: redis.Redis, saver: RedisSaver) -> list[bytes]:
    """Keys under the saver's prefix, but for the marker its setup() sets (runs.py)."""
    marker = saver.keys.run_index_marker().encode()
    return [k for k in client.keys(f"{saver.key_prefix}:*") if k != marker]


def run_react(saver: Any, thread_id: str, rounds: int = 2) -> None:
    """A real compiled graph: ``rounds`` tool calls, then its state read back."""
    graph = react_graph(rounds).compile(checkpointer=saver)
    config = {"configurable": {"thread_id": thread_id}}
    out = graph.invoke(react_input(), config)
    assert out["messages"][-1].content == "final answer"
    assert graph.get_state(config).values["messages"][-1].content == "final answer"


async def arun_react(saver: Any, thread_id: str, rounds: int = 2) -> None:
    graph = react_graph(rounds).compile(checkpointer=saver)
    config = {"configurable": {"thread_id": thread_id}}
    out = await graph.ainvoke(react_input(), config)
    assert out["messages"][-1].content == "final answer"
    assert (await graph.aget_state(config)).values["messages"][-1].content == "final answer"


# -- from_conn_string: saver options to the saver, the rest to redis-py ----------------
def test_client_options_reach_redis_py_and_saver_options_the_saver(
    redis_url: str, key_prefix: str, redis_client: redis.Redis
) -> None:
    name = f"lgd-ops-{uuid.uuid4().hex[:8]}"
    with RedisSaver.from_conn_string(
        redis_url, key_prefix=key_prefix, ttl=600, client_name=name, socket_timeout=7
    ) as saver:
        assert saver.key_prefix == key_prefix and saver.ttl == 600
        assert saver.client.connection_pool.connection_kwargs["socket_timeout"] == 7
        run_react(saver, "t")
        names = [c["name"] for c in redis_client.client_list()]
        assert name in names  # the server saw the client name: the option was used
        assert saver.client.get_retry().get_retries() == 10  # the default Retry is kept
        assert redis_client.ttl(saver.keys.thread("t").cps) > 0


async def test_async_client_options_reach_redis_py(
    redis_url: str, key_prefix: str, redis_client: redis.Redis
) -> None:
    name = f"lgd-ops-{uuid.uuid4().hex[:8]}"
    async with AsyncRedisSaver.from_conn_string(
        redis_url, key_prefix=key_prefix, max_connections=7, client_name=name, socket_timeout=7
    ) as saver:
        pool = saver.client.connection_pool
        assert pool.max_connections == 7
        assert pool.connection_kwargs["socket_timeout"] == 7
        await arun_react(saver, "t")
        assert name in [c["name"] for c in redis_client.client_list()]
        assert saver.client.get_retry().get_retries() == 10


def test_a_retry_of_the_callers_own_replaces_the_default(redis_url: str, key_prefix: str) -> None:
    with RedisSaver.from_conn_string(
        redis_url, key_prefix=key_prefix, retry=Retry(NoBackoff(), 2)
    ) as saver:
        assert saver.client.get_retry().get_retries() == 2


@pytest.mark.parametrize(
    "kwargs, named, hint",
    [
        ({"bogus_option": 1}, "bogus_option", None),
        ({"ssl_ca_cert": "ca.pem"}, "ssl_ca_cert", "did you mean 'ssl_ca_certs'"),
        ({"ssl_ca_certs": "ca.pem"}, "ssl_ca_certs", "use a rediss:// URL"),
        ({"key_prefx": "x"}, "key_prefx", "did you mean 'key_prefix'"),
        ({"cluster": True, "ssl_ca_cert": "ca.pem"}, "ssl_ca_cert", "'ssl_ca_certs'"),
    ],
)
def test_a_keyword_redis_py_does_not_take_is_a_configuration_error_naming_it(
    redis_url: str, kwargs: dict[str, Any], named: str, hint: str | None
) -> None:
    """Not a TypeError from deep inside redis-py at the first command, and not silently
    dropped (the Redis Cluster client drops keywords it does not know)."""
    with (
        pytest.raises(ConfigurationError, match=repr(named)) as caught,
        RedisSaver.from_conn_string(redis_url, **kwargs),
    ):
        pass
    if hint:
        assert hint in str(caught.value)


def test_tls_keywords_are_taken_with_a_rediss_url(redis_url: str) -> None:
    """Checked against the connection class the URL selects (no connection made)."""
    from langgraph_durable.io.connect import sync_client

    tls_url = redis_url.replace("redis://", "rediss://")
    client = sync_client(RedisSaver, tls_url, cluster=False, options={"ssl_ca_certs": "ca"})
    assert client.connection_pool.connection_kwargs["ssl_ca_certs"] == "ca"
    client.close()


@pytest.mark.parametrize("cluster", [False, True])
async def test_async_from_conn_string_names_a_keyword_redis_py_does_not_take(
    redis_url: str, cluster: bool
) -> None:
    with pytest.raises(ConfigurationError, match="'sockettimeout'.*'socket_timeout'"):
        async with AsyncRedisSaver.from_conn_string(redis_url, cluster=cluster, sockettimeout=5):
            pass


# -- rediss:// with a self-signed CA ---------------------------------------------------
@pytest.fixture(scope="module")
def tls_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    if shutil.which("openssl") is None:
        pytest.skip("no openssl CLI to make the test certificates with")
    workdir = tmp_path_factory.mktemp("tls")
    tls = make_tls_files(str(workdir))
    try:
        server = start_server(str(workdir), tls=tls)
    except RuntimeError as exc:
        log = str(exc)
        if re.search(
            r"tls.*(not supported|support)|bad directive|unknown option", log, re.IGNORECASE
        ):
            pytest.skip(f"this redis-server has no TLS support: {log}")
        raise
    yield server
    server.stop()


def test_rediss_url_with_the_ca_runs_a_graph(tls_server: Server) -> None:
    assert tls_server.tls is not None and tls_server.url.startswith("rediss://")
    with RedisSaver.from_conn_string(
        tls_server.url, ssl_ca_certs=tls_server.tls.ca, key_prefix="tls-sync"
    ) as saver:
        run_react(saver, "t")
        info = saver.client.connection_pool.connection_kwargs
        assert info["ssl_ca_certs"] == tls_server.tls.ca


async def test_rediss_url_with_the_ca_runs_a_graph_async(tls_server: Server) -> None:
    assert tls_server.tls is not None
    async with AsyncRedisSaver.from_conn_string(
        tls_server.url, ssl_ca_certs=tls_server.tls.ca, key_prefix="tls-async"
    ) as saver:
        await arun_react(saver, "t")


def test_rediss_without_the_ca_is_refused_certificate_verify_failed(tls_server: Server) -> None:
    """The server's certificate is signed by a CA the system does not trust."""
    with (
        pytest.raises(redis.ConnectionError, match="(?i)certificate verify failed"),
        RedisSaver.from_conn_string(tls_server.url, key_prefix="tls-refused"),
    ):
        pass


async def test_rediss_without_the_ca_is_refused_async(tls_server: Server) -> None:
    with pytest.raises(redis.ConnectionError, match="(?i)certificate verify failed"):
        async with AsyncRedisSaver.from_conn_string(tls_server.url, key_prefix="tls-refused"):
            pass


def test_plain_redis_url_to_a_tls_port_fails_rather_than_hangs(tls_server: Server) -> None:
    plain = tls_server.url.replace("rediss://", "redis://")
    with (
        pytest.raises(redis.ConnectionError),
        RedisSaver.from_conn_string(
            plain, retry=Retry(NoBackoff(), 0), socket_timeout=5, key_prefix="tls-plain"
        ),
    ):
        pass


# -- the documented minimal ACL -----------------------------------------------------------
def readme_acl(marker: str) -> str:
    """The ACL SETUSER line under ``<!-- marker`` in docs/operations/security.md, as
    written there."""
    text = SECURITY.read_text()
    block = text[text.index(f"<!-- {marker}") :]
    return next(line for line in block.splitlines() if line.startswith("ACL SETUSER"))


def acl_user(admin: redis.Redis, line: str, prefix: str, password: str) -> str:
    """Create the user of a documented ACL line, for ``prefix`` and with ``password``."""
    args = [
        arg.replace("~lgd:*", f"~{prefix}:*").replace(">CHANGE-ME", f">{password}")
        for arg in line.split()[2:]
    ]
    admin.execute_command("ACL", "SETUSER", *args)
    return args[0]


@pytest.fixture
def acl_server(tmp_path: Path) -> Iterator[Server]:
    server = start_server(str(tmp_path))
    yield server
    server.stop()


def acl_denials(admin: redis.Redis) -> list[str]:
    """Commands the ACL refused since the log was reset, but for the two the docs leave
    out on purpose: redis-py's handshake (CLIENT SETINFO, Redis 7.2+) and the eviction
    check's CONFIG GET, which would reveal every setting."""
    return [
        f"{e['username']}: {e['object']} ({e['reason']})"
        for e in admin.acl_log()
        if e["object"] not in ("client|setinfo", "config|get")
    ]


def test_a_graph_runs_as_the_readme_worker_user(acl_server: Server, tmp_path: Path) -> None:
    """Checkpoints with ttl and retention, pending writes, the tool ledger with an
    escalation, a lease, copy, list across threads, delete_for_runs, prune, verify, and
    the repairs (quarantine of a damaged record, a key of the wrong type moved aside):
    none of it is refused, and nothing is refused silently either (the ACL log is empty)."""
    from tests.helpers.ledger_agent import POLICIES, START_INPUT, Effects, agent_graph, answer
    from tests.integration.test_ledger import Crash, crash_at

    admin = acl_server.client()
    prefix = "acl-ops"
    user = acl_user(admin, readme_acl("acl-worker"), prefix, "s3cret-worker")
    admin.acl_log_reset()
    url = f"redis://{user}:s3cret-worker@127.0.0.1:{acl_server.port}/0"
    with RedisSaver.from_conn_string(url, key_prefix=prefix, ttl=3600, keep_last=3) as saver:
        assert user in {c["user"] for c in admin.client_list()}  # connected as the user
        run_react(saver, "react", rounds=6)  # keep_last collects as it goes
        effects = Effects(str(tmp_path / "effects"))
        config = {"configurable": {"thread_id": "ledger"}}
        ledger = ToolLedger(saver, policies=POLICIES)
        graph = agent_graph(
            ledger, effects, hook=crash_at("tool_after_effect", "send_email")
        ).compile(checkpointer=saver)
        with pytest.raises(Crash):
            graph.invoke(START_INPUT, config)
        out = graph.invoke(None, config)
        out = graph.invoke(Command(resume=answer(out["__interrupt__"][0].value, effects)), config)
        assert out["messages"][-1].content == "all done"
        with saver.lease("react"):
            run_react(saver, "react", rounds=1)
        saver.copy_thread("ledger", "ledger-copy")
        assert {c.config["configurable"]["thread_id"] for c in saver.list(None)} >= {
            "react",
            "ledger",
            "ledger-copy",
        }
        # Damage, made by the admin: a flipped byte, and a key of the wrong type.
        tk = saver.keys.thread("react")
        newest = saver.get_tuple({"configurable": {"thread_id": "react"}})
        assert newest is not None
        member = saver.keys.checkpoint_member("", newest.checkpoint["id"])
        flip_last_bit(admin, tk.cp, member)
        admin.delete(tk.wix)
        admin.set(tk.wix, "not a zset")
        assert saver.get_tuple({"configurable": {"thread_id": "react"}}) is not None
        assert admin.hlen(tk.qt) == 1  # the damaged record was moved to the quarantine
        run_react(saver, "react", rounds=1)  # the write moves the wrong-typed key aside
        assert admin.type(tk.wix + ":damaged") == b"string"
        assert saver.verify("ledger-copy").ok
        saver.prune(["ledger-copy"])
        saver.delete_for_runs([str(newest.metadata.get("run_id"))])
        saver.delete_thread("ledger-copy")
        assert saver.client.execute_command("WAIT", 0, 1) == 0
    assert acl_denials(admin) == []
    admin.close()


def test_the_readme_inspector_user_reads_and_cannot_write(acl_server: Server) -> None:
    """Reads (their scripts go as EVALSHA_RO, which read-only key access allows) are not
    refused, not even silently; a write is."""
    admin = acl_server.client()
    prefix = "acl-ro"
    with RedisSaver.from_conn_string(acl_server.url, key_prefix=prefix) as saver:
        run_react(saver, "t")
    user = acl_user(admin, readme_acl("acl-inspector"), prefix, "s3cret-inspector")
    admin.acl_log_reset()
    url = f"redis://{user}:s3cret-inspector@127.0.0.1:{acl_server.port}/0"
    with RedisSaver.from_conn_string(url, key_prefix=prefix) as inspector:
        config = {"configurable": {"thread_id": "t"}}
        assert inspector.get_tuple(config) is not None
        assert len(list(inspector.list(config))) > 1
        assert len(list(inspector.list(None))) > 1
        assert inspector.verify("t").ok
        assert ToolLedger(inspector).entries("t") == []
        assert acl_denials(admin) == []
        with pytest.raises(redis.exceptions.NoPermissionError):
            inspector.delete_thread("t")
    admin.close()


# -- sync calls on an AsyncRedisSaver whose loop is not running --------------------------
async def _make_async_saver(url: str, prefix: str) -> AsyncRedisSaver:
    saver = AsyncRedisSaver(redis.asyncio.Redis.from_url(url), key_prefix=prefix)
    await saver.asetup()
    return saver


SYNC_CALLS: dict[str, Callable[[AsyncRedisSaver, dict[str, Any]], Any]] = {
    "get_tuple": lambda s, c: s.get_tuple(c),
    "list": lambda s, c: list(s.list(c)),
    "put": lambda s, c: s.put(c, empty_checkpoint(), {}, {}),
    "put_writes": lambda s, c: s.put_writes(
        {"configurable": {**c["configurable"], "checkpoint_id": "1"}}, [("x", 1)], "task"
    ),
    "delete_thread": lambda s, c: s.delete_thread("t"),
    "verify": lambda s, c: s.verify("t"),
    "graph.invoke": lambda s, c: (
        chain(CounterState, ("inc", increment)).compile(checkpointer=s).invoke({"n": 0}, c)
    ),
}


class CounterState(TypedDict):
    n: int


def increment(state: CounterState) -> dict[str, int]:
    return {"n": state["n"] + 1}


def call_in_thread(fn: Callable[[], Any]) -> BaseException | None:
    """Run ``fn`` in another thread (where sync calls on an AsyncRedisSaver belong) and
    return what it raised. The join's timeout only turns a hang into a failure."""
    raised: list[BaseException | None] = [None]

    def target() -> None:
        try:
            fn()
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            raised[0] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(timeout=120)
    assert not thread.is_alive(), "the sync call hung instead of raising"
    return raised[0]


@pytest.mark.parametrize("call", list(SYNC_CALLS))
def test_a_sync_call_on_a_stopped_loop_raises_at_once(
    redis_url: str, key_prefix: str, call: str
) -> None:
    """The loop the saver was set up on exists but runs no more (run_until_complete
    returned): a sync call used to wait forever for a loop nobody runs."""
    loop = asyncio.new_event_loop()
    try:
        saver = loop.run_until_complete(_make_async_saver(redis_url, key_prefix))
        config = {"configurable": {"thread_id": "t"}}
        raised = call_in_thread(lambda: SYNC_CALLS[call](saver, config))
        assert isinstance(raised, EventLoopError), raised
        assert isinstance(raised, asyncio.InvalidStateError)  # as before for other misuse
        assert "not running" in str(raised)
        loop.run_until_complete(saver.client.aclose())
    finally:
        loop.close()


@pytest.mark.parametrize("call", ["get_tuple", "put", "graph.invoke"])
def test_a_sync_call_on_a_closed_loop_raises_at_once(
    redis_url: str, key_prefix: str, call: str
) -> None:
    saver = asyncio.run(_make_async_saver(redis_url, key_prefix))  # its loop is closed now
    with pytest.raises(EventLoopError, match="closed"):
        SYNC_CALLS[call](saver, {"configurable": {"thread_id": "t"}})


def test_a_sync_call_from_another_thread_on_a_running_loop_still_works(
    redis_url: str, key_prefix: str
) -> None:
    async def main() -> None:
        saver = await _make_async_saver(redis_url, key_prefix)
        config = {"configurable": {"thread_id": "t"}}
        await asyncio.to_thread(SYNC_CALLS["graph.invoke"], saver, config)
        assert (await saver.aget_tuple(config)) is not None
        await saver.client.aclose()

    asyncio.run(main())


# -- typed errors for inputs Redis cannot store ------------------------------------------
def cfg(**configurable: Any) -> dict[str, Any]:
    return {"configurable": {"thread_id": "t", **configurable}}


BAD_CONFIGS = [
    (cfg(checkpoint_ns=5), "checkpoint_ns.*int"),
    (cfg(checkpoint_ns=None), "checkpoint_ns.*NoneType"),
    (cfg(checkpoint_ns=b"ns"), "checkpoint_ns.*bytes"),
    (cfg(checkpoint_id=5), "checkpoint_id.*int"),
    (cfg(checkpoint_id=b"1"), "checkpoint_id.*bytes"),
    (cfg(thread_id=["t"]), "thread_id.*list"),
    (cfg(thread_id="t\ud800"), r"thread_id.*lone surrogate '\\ud800' at position 1"),
    (cfg(checkpoint_ns="\udfff"), r"checkpoint_ns.*lone surrogate '\\udfff'"),
    (cfg(checkpoint_id="1\ud800"), r"checkpoint_id.*lone surrogate '\\ud800'"),
]


@pytest.mark.parametrize("config, message", BAD_CONFIGS)
@pytest.mark.parametrize("call", ["get_tuple", "put", "put_writes", "list"])
def test_a_bad_config_field_is_an_invalid_config_error_naming_it(
    saver: RedisSaver, redis_client: redis.Redis, config: Any, message: str, call: str
) -> None:
    if call == "put_writes" and "checkpoint_id" not in config["configurable"]:
        config = {"configurable": {**config["configurable"], "checkpoint_id": "1"}}
    if call == "list" and config["configurable"].get("checkpoint_ns", "") is None:
        message = ""  # list(checkpoint_ns=None) means every namespace: allowed
    calls: dict[str, Callable[[], Any]] = {
        "get_tuple": lambda: saver.get_tuple(config),
        "put": lambda: saver.put(config, empty_checkpoint(), {}, {}),
        "put_writes": lambda: saver.put_writes(config, [("x", 1)], "task"),
        "list": lambda: list(saver.list(config)),
    }
    if not message:
        calls[call]()
        return
    with pytest.raises(InvalidConfigError, match=message):
        calls[call]()
    assert not written(redis_client, saver)  # nothing was written


@pytest.mark.parametrize(
    "options, message",
    [
        ({"before": "x"}, r"before=.*config.*str 'x'"),
        ({"before": {"configurable": {"checkpoint_id": 5}}}, "before.*checkpoint_id.*int"),
        ({"filter": [("step", 1)]}, r"filter=.*dict.*list"),
        ({"limit": "2"}, r"limit=.*int.*str '2'"),
        ({"limit": 2.0}, r"limit=.*int.*float"),
    ],
)
@pytest.mark.parametrize("config", [cfg(), cfg(checkpoint_ns=""), None])
def test_bad_list_options_are_invalid_config_errors_naming_them(
    saver: RedisSaver, config: Any, options: dict[str, Any], message: str
) -> None:
    saver.put(cfg(checkpoint_ns=""), empty_checkpoint(), {}, {})
    with pytest.raises(InvalidConfigError, match=message):
        list(saver.list(config, **options))
    assert len(list(saver.list(config, before={}, filter={}, limit=None))) == 1


@pytest.mark.parametrize(
    "write, message",
    [
        (lambda s, c: s.put(c, {**empty_checkpoint(), "id": 7}, {}, {}), r"checkpoint\['id'\]"),
        (
            lambda s, c: s.put(c, empty_checkpoint(), {}, {"ch\ud800": "1"}),
            r"channel name in new_versions.*'\\ud800'",
        ),
        (
            lambda s, c: s.put_writes(c, [("ok", 1), ("ch\udc00", 2)], "task"),
            r"channel of pending write 1 of task 'task'.*'\\udc00'",
        ),
        (lambda s, c: s.put_writes(c, [(3, 1)], "task"), "channel of pending write 0.*int"),
        (lambda s, c: s.put_writes(c, [("x", 1)], "task\ud800"), r"task_id.*'\\ud800'"),
        (lambda s, c: s.put_writes(c, [("x", 1)], None), "task_id.*NoneType"),
        (lambda s, c: s.put_writes(c, [("x", 1)], "t", "p\ud800"), r"task_path.*'\\ud800'"),
        (lambda s, c: s.delete_thread("\ud800"), r"thread_id.*'\\ud800'"),
        (lambda s, c: s.copy_thread("t", "\ud800"), r"thread_id.*'\\ud800'"),
        (lambda s, c: s.verify("x\udbff"), r"thread_id.*'\\udbff'"),
        (
            lambda s, c: list(s.list(c, before={"configurable": {"checkpoint_id": 3}})),
            r"before\['configurable'\]\['checkpoint_id'\].*int",
        ),
    ],
)
def test_names_redis_cannot_store_are_refused_before_anything_is_sent(
    saver: RedisSaver, redis_client: redis.Redis, write: Any, message: str
) -> None:
    config = cfg(checkpoint_ns="", checkpoint_id="1")
    with pytest.raises(InvalidConfigError, match=message):
        write(saver, config)
    assert not written(redis_client, saver)


def test_a_graph_with_a_lone_surrogate_thread_id_fails_with_a_typed_error(
    saver: RedisSaver,
) -> None:
    graph = chain(CounterState, ("inc", increment)).compile(checkpointer=saver)
    with pytest.raises(InvalidConfigError, match="thread_id.*lone surrogate"):
        graph.invoke({"n": 0}, {"configurable": {"thread_id": "order-\udc80"}})


async def test_async_saver_refuses_the_same_inputs(redis_url: str, key_prefix: str) -> None:
    async with AsyncRedisSaver.from_conn_string(redis_url, key_prefix=key_prefix) as saver:
        with pytest.raises(InvalidConfigError, match="checkpoint_ns.*int"):
            await saver.aget_tuple(cfg(checkpoint_ns=1))
        with pytest.raises(InvalidConfigError, match="task_id.*lone surrogate"):
            await saver.aput_writes(cfg(checkpoint_id="1"), [("x", 1)], "\ud800")


# -- values over Redis's 512 MB limit ----------------------------------------------------
def test_the_record_size_check_is_exact_at_the_limit() -> None:
    record_size(100, thread_id="t", what="w", limit=100)
    with pytest.raises(ValueTooLargeError) as caught:
        record_size(101, thread_id="t", what="the value of channel 'c'", limit=100)
    err = caught.value
    assert (err.thread_id, err.size, err.limit) == ("t", 101, 100)
    assert "the value of channel 'c' of thread 't'" in str(err)
    assert MAX_RECORD_BYTES == 512 * 1024 * 1024  # Redis's default proto-max-bulk-len


@pytest.fixture(scope="module")
def huge() -> bytes:
    """A value just over 512 MB (one allocation, shared by the tests below)."""
    return b"\0" * (MAX_RECORD_BYTES + 1)


class BlobState(TypedDict):
    blob: bytes


def test_a_channel_value_over_512mb_is_refused_naming_channel_and_thread(
    saver: RedisSaver, redis_client: redis.Redis, huge: bytes
) -> None:
    config = cfg(checkpoint_ns="")
    checkpoint = {**empty_checkpoint(), "channel_values": {"blob": huge}}
    with pytest.raises(ValueTooLargeError, match="channel 'blob' of thread 't'") as caught:
        saver.put(config, checkpoint, {}, {"blob": "1"})  # type: ignore[arg-type]
    assert caught.value.size > MAX_RECORD_BYTES and caught.value.thread_id == "t"
    assert isinstance(caught.value, ValueError)
    assert not written(redis_client, saver)


def test_a_graph_writing_over_512mb_fails_naming_the_channel(
    saver: RedisSaver, redis_client: redis.Redis, huge: bytes
) -> None:
    """The node's write is refused when LangGraph saves it (put_writes); the thread keeps
    what it had before, and the server never sees the value."""
    graph = chain(BlobState, ("grow", lambda state: {"blob": huge})).compile(checkpointer=saver)
    config = {"configurable": {"thread_id": "big"}}
    with pytest.raises(ValueTooLargeError, match="channel 'blob'.*of thread 'big'"):
        graph.invoke({"blob": b"small"}, config)
    assert graph.get_state(config).values == {"blob": b"small"}
    assert redis_client.ping()
