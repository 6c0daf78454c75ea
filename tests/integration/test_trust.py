"""Stored bytes never run code: the default serializer is strict, and a record that
verifies but cannot (or may not) be deserialized is handled like any other damage."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import ormsgpack
import pytest
import redis
from click.testing import CliRunner
from langgraph.checkpoint.serde import _msgpack
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

from langgraph_durable import CheckpointCorruptedError, RedisSaver, UnreadableThreadError
from langgraph_durable.cli import cli
from langgraph_durable.core import codec
from tests.helpers.graphs import chain

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


class CountState(TypedDict):
    count: int
    note: str


def counting_graph() -> StateGraph:
    def step(state: CountState) -> dict[str, Any]:
        return {"count": state["count"] + 1, "note": f"step {state['count'] + 1}"}

    return chain(CountState, ("one", step), ("two", step), ("three", step))


def cfg(thread_id: str, checkpoint_id: str | None = None) -> dict[str, Any]:
    conf: dict[str, Any] = {"thread_id": thread_id, "checkpoint_ns": ""}
    if checkpoint_id:
        conf["checkpoint_id"] = checkpoint_id
    return {"configurable": conf}


def code_running_payload(marker: Path) -> bytes:
    """msgpack naming os.system with a command, as LangGraph's ext hook would call it."""
    call = ormsgpack.packb(("os", "system", f"touch {marker}"))
    return ormsgpack.packb(ormsgpack.Ext(0, call))


def forge_newest_value(
    saver: RedisSaver, client: redis.Redis, thread_id: str, payload: bytes
) -> str:
    """Overwrite the newest checkpoint's "note" value with a record whose checksum is valid
    (anyone who can write to Redis can compute an xxh3) but whose body is ``payload``."""
    newest = saver.get_tuple(cfg(thread_id))
    assert newest is not None
    version = newest.checkpoint["channel_versions"]["note"]
    field = saver.keys.blob_field("", "note", version)
    record = codec.seal(saver.core, "bl", thread_id, field, ["msgpack", payload])
    client.hset(saver.keys.thread(thread_id).bl, field, record)
    return newest.checkpoint["id"]


def test_a_forged_record_naming_os_system_runs_nothing(
    redis_url: str, key_prefix: str, redis_client: redis.Redis, tmp_path: Path, caplog: Any
) -> None:
    assert _msgpack.STRICT_MSGPACK_ENABLED is False  # LangGraph's permissive default is on
    marker = tmp_path / "pwned"
    with RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix) as saver:
        graph = counting_graph().compile(checkpointer=saver)
        graph.invoke({"count": 0, "note": ""}, cfg("t"))
        forged_id = forge_newest_value(saver, redis_client, "t", code_running_payload(marker))

        with caplog.at_level(logging.WARNING, logger="langgraph_durable"):
            state = graph.get_state(cfg("t"))
        assert not marker.exists()
        report = saver.recovery_report("t")
        assert report is not None and [s.checkpoint_id for s in report.skipped] == [forged_id]
        # The state is read from the previous checkpoint, which verifies.
        assert state.config["configurable"]["checkpoint_id"] == report.used_checkpoint_id
        assert "refused type os.system" in report.skipped[0].reason

        with pytest.raises(CheckpointCorruptedError, match="refused type os.system"):
            saver.get_tuple(cfg("t", forged_id))
        verified = saver.verify("t")
        assert not verified.ok and forged_id in verified.damaged_checkpoints
        assert any("refused type os.system" in f.reason for f in verified.findings)

        # The command line reads the same way: no call, the damage named.
        result = CliRunner().invoke(
            cli, ["show", "t", forged_id, "--redis-url", redis_url, "--key-prefix", key_prefix]
        )
        assert not marker.exists()
        assert "refused type os.system" in result.output + str(result.exception)

        # A refusal may be this reader's configuration: the record is kept, not quarantined.
        assert redis_client.hlen(saver.keys.thread("t").qt) == 0
    assert not marker.exists()


def test_pickle_and_json_records_are_refused_by_the_default_serializer(
    redis_url: str, key_prefix: str, redis_client: redis.Redis
) -> None:
    with RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix) as saver:
        graph = counting_graph().compile(checkpointer=saver)
        graph.invoke({"count": 0, "note": ""}, cfg("t"))
        newest = saver.get_tuple(cfg("t"))
        assert newest is not None
        field = saver.keys.blob_field("", "note", newest.checkpoint["channel_versions"]["note"])
        for type_ in ("pickle", "json"):
            record = codec.seal(saver.core, "bl", "t", field, [type_, b'"x"'])
            redis_client.hset(saver.keys.thread("t").bl, field, record)
            with pytest.raises(
                CheckpointCorruptedError, match=f"refused serialization type '{type_}'"
            ):
                saver.get_tuple(cfg("t", newest.checkpoint["id"]))


def test_an_encrypting_serializer_refuses_a_plain_json_record_too(
    redis_url: str, key_prefix: str, redis_client: redis.Redis
) -> None:
    """EncryptedSerializer hands a record without a cipher suffix to the serializer inside:
    a forged plain "json" record would be revived by LangChain's reviver, past the
    msgpack allowlist. Refused like it is without encryption."""
    serde = EncryptedSerializer.from_pycryptodome_aes(key=b"1" * 32)
    with RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix, serde=serde) as saver:
        graph = counting_graph().compile(checkpointer=saver)
        graph.invoke({"count": 0, "note": ""}, cfg("t"))
        newest = saver.get_tuple(cfg("t"))
        assert newest is not None and newest.checkpoint["channel_values"]["note"] == "step 3"
        field = saver.keys.blob_field("", "note", newest.checkpoint["channel_versions"]["note"])
        record = codec.seal(saver.core, "bl", "t", field, ["json", b'"forged"'])
        redis_client.hset(saver.keys.thread("t").bl, field, record)
        with pytest.raises(CheckpointCorruptedError, match="refused serialization type 'json'"):
            saver.get_tuple(cfg("t", newest.checkpoint["id"]))


@pytest.mark.parametrize("module", [7, None, b"os", 1.5])
def test_a_type_named_by_something_other_than_a_string_is_refused_not_passed_through(
    redis_url: str, key_prefix: str, redis_client: redis.Redis, module: Any
) -> None:
    with RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix) as saver:
        graph = counting_graph().compile(checkpointer=saver)
        graph.invoke({"count": 0, "note": ""}, cfg("t"))
        call = ormsgpack.packb((module, "system", "the raw argument"))
        forged_id = forge_newest_value(
            saver, redis_client, "t", ormsgpack.packb(ormsgpack.Ext(0, call))
        )
        with pytest.raises(CheckpointCorruptedError, match="refused type"):
            saver.get_tuple(cfg("t", forged_id))
        assert graph.get_state(cfg("t")).values["note"] != "the raw argument"


@dataclass
class Invoice:
    number: int
    amount: float


class InvoiceState(TypedDict):
    invoice: Invoice


def invoice_graph() -> StateGraph:
    builder = StateGraph(InvoiceState)
    builder.add_node("bump", lambda s: {"invoice": Invoice(s["invoice"].number + 1, 9.5)})
    builder.add_edge(START, "bump")
    builder.add_edge("bump", END)
    return builder


def test_types_the_graph_declares_or_the_user_allows_round_trip(
    redis_url: str, key_prefix: str, redis_client: redis.Redis
) -> None:
    with RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix) as saver:
        graph = invoice_graph().compile(checkpointer=saver)
        graph.invoke({"invoice": Invoice(1, 1.0)}, cfg("inv"))
        # The compiled graph's allowlist (its state schema) admits Invoice.
        assert graph.get_state(cfg("inv")).values["invoice"] == Invoice(2, 9.5)
        # The bare saver does not know the type: damage for this reader, not destroyed.
        newest = graph.get_state(cfg("inv")).config["configurable"]["checkpoint_id"]
        with pytest.raises(CheckpointCorruptedError, match="Invoice"):
            saver.get_tuple(cfg("inv", newest))
        assert redis_client.hlen(saver.keys.thread("inv").qt) == 0
        assert graph.get_state(cfg("inv")).values["invoice"] == Invoice(2, 9.5)
    with RedisSaver.from_conn_string(
        redis_url, key_prefix=key_prefix, allowed_types=[Invoice]
    ) as allowed:
        tup = allowed.get_tuple(cfg("inv", newest))
        assert tup is not None and tup.checkpoint["channel_values"]["invoice"] == Invoice(2, 9.5)


def test_a_wrong_encryption_key_reads_as_damage_not_as_an_exception(
    redis_url: str, key_prefix: str
) -> None:
    right = EncryptedSerializer.from_pycryptodome_aes(key=b"1" * 32)
    wrong = EncryptedSerializer.from_pycryptodome_aes(key=b"2" * 32)
    with RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix, serde=right) as saver:
        graph = counting_graph().compile(checkpointer=saver)
        graph.invoke({"count": 0, "note": ""}, cfg("enc"))
        newest = saver.get_tuple(cfg("enc"))
        assert newest is not None and newest.checkpoint["channel_values"]["count"] == 3
    with RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix, serde=wrong) as saver:
        # Nothing readable for a reason that may be this reader's: raise, never start over.
        with pytest.raises(UnreadableThreadError, match="serializer"):
            saver.get_tuple(cfg("enc"))
        report = saver.recovery_report("enc")
        assert report is not None and report.skipped
        assert all("undeserializable" in s.reason for s in report.skipped)
        with pytest.raises(CheckpointCorruptedError, match="undeserializable"):
            saver.get_tuple(cfg("enc", newest.checkpoint["id"]))
        verified = saver.verify("enc")
        assert not verified.ok and not verified.intact_checkpoints
    with RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix, serde=right) as saver:
        tup = saver.get_tuple(cfg("enc"))  # nothing was quarantined: the right key reads it
        assert tup is not None and tup.checkpoint["id"] == newest.checkpoint["id"]


def test_a_permissive_serializer_without_signing_key_is_warned_about(
    redis_url: str, key_prefix: str, caplog: Any
) -> None:
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

    permissive = JsonPlusSerializer(allowed_msgpack_modules=True)
    with (
        caplog.at_level(logging.WARNING, logger="langgraph_durable"),
        RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix, serde=permissive),
    ):
        pass
    assert "can make readers run code" in caplog.text


@pytest.mark.parametrize(
    "damage",
    [
        {"channel_versions": []},
        {"channel_versions": {1: "x"}},
        {"channel_versions": {"count": True}},
        {"id": "not-its-id"},
        {"ts": 12},
        "drop channel_versions",
    ],
)
def test_a_verified_checkpoint_of_the_wrong_shape_is_damage_not_a_crash(
    redis_url: str, key_prefix: str, redis_client: redis.Redis, damage: Any
) -> None:
    """Anyone who can write to Redis can seal a checkpoint with a valid checksum whose
    content LangGraph never wrote: it is skipped like any damage."""
    with RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix) as saver:
        graph = counting_graph().compile(checkpointer=saver)
        graph.invoke({"count": 0, "note": ""}, cfg("t"))
        newest = saver.get_tuple(cfg("t"))
        assert newest is not None
        checkpoint = {k: v for k, v in newest.checkpoint.items() if k != "channel_values"}
        if damage == "drop channel_versions":
            checkpoint.pop("channel_versions")
        else:
            checkpoint.update(damage)
        member = saver.keys.checkpoint_member("", newest.checkpoint["id"])
        parent = newest.parent_config["configurable"]["checkpoint_id"]
        body = [parent, *saver.serde.dumps_typed(checkpoint), *saver.serde.dumps_typed({})]
        redis_client.hset(
            saver.keys.thread("t").cp, member, codec.seal(saver.core, "cp", "t", member, body)
        )

        tup = saver.get_tuple(cfg("t"))
        assert tup is not None and tup.checkpoint["id"] == parent
        assert next(c.checkpoint["id"] for c in saver.list(cfg("t"))) == parent
        assert not saver.verify("t").ok
        with pytest.raises(CheckpointCorruptedError, match="malformed checkpoint"):
            saver.get_tuple(cfg("t", newest.checkpoint["id"]))


def test_verify_names_a_key_of_the_wrong_type_instead_of_raising(
    saver: RedisSaver, redis_client: redis.Redis
) -> None:
    counting_graph().compile(checkpointer=saver).invoke({"count": 0, "note": ""}, cfg("t"))
    tk = saver.keys.thread("t")
    for key in (tk.cp, tk.qt):
        redis_client.delete(key)
        redis_client.set(key, b"a stray SET")
        report = saver.verify("t")
        assert not report.ok
        assert any(f.key == key and f.reason == "key of the wrong type" for f in report.findings)


def test_copy_thread_and_the_threads_command_survive_keys_of_the_wrong_type(
    redis_url: str, key_prefix: str, redis_client: redis.Redis
) -> None:
    with RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix) as saver:
        counting_graph().compile(checkpointer=saver).invoke({"count": 0, "note": ""}, cfg("t"))
        tk = saver.keys.thread("t")
        for key in (tk.wr, tk.lgx, tk.runs):
            redis_client.set(key, b"a stray SET")
        saver.copy_thread("t", "copy")
        copied = saver.get_tuple(cfg("copy"))
        assert copied is not None and copied.checkpoint["channel_values"]["count"] == 3
        result = CliRunner().invoke(
            cli, ["threads", "--redis-url", redis_url, "--key-prefix", key_prefix]
        )
        assert result.exit_code == 0, result.output
        assert "damaged" in result.output
