"""Compressed values: smaller in Redis, read by any saver, verified before a byte is
decompressed, and never a decompression bomb."""

from __future__ import annotations

import logging
import random
import resource
import zlib
from typing import Any

import msgpack
import pytest
import redis
import zstandard

from langgraph_durable import ConfigurationError, RedisSaver
from langgraph_durable.core.compression import MARK, MAX_BYTES, Compression
from langgraph_durable.core.errors import RecordDamagedError
from langgraph_durable.core.keys import KeySchema
from tests.helpers import graphs
from tests.helpers.redis_keys import flipped


def texts(state: dict[str, Any]) -> list[tuple[str, Any]]:
    return [(m.type, m.content) for m in state["messages"]]  # tool message ids are random


def value_bytes(client: redis.Redis, saver: RedisSaver, thread_id: str) -> int:
    """Bytes of the channel values and of the elements of message lists (elements.py)."""
    tk = saver.keys.thread(thread_id)
    return sum(len(v) for key in (tk.bl, tk.el) for v in client.hvals(key))


@pytest.mark.parametrize("algorithm", ["zstd", "zlib", "auto", "the default"])
def test_compressed_threads_are_smaller_and_read_back_by_any_saver(
    redis_url: str, key_prefix: str, redis_client: redis.Redis, algorithm: str
) -> None:
    builder = graphs.react_graph(rounds=6, payload=3000, realistic=True)
    config: dict[str, Any] = {"configurable": {"thread_id": "plain"}}
    with RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix, compression=None) as plain:
        out = builder.compile(checkpointer=plain).invoke(graphs.react_input(), config)
        plain_bytes = value_bytes(redis_client, plain, "plain")
    config = {"configurable": {"thread_id": "packed"}}
    options = {} if algorithm == "the default" else {"compression": algorithm}
    with RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix, **options) as packed:
        graph = builder.compile(checkpointer=packed)
        assert texts(graph.invoke(graphs.react_input(), config)) == texts(out)
        # Elements are compressed one by one (a 3,000-character message: about half).
        assert value_bytes(redis_client, packed, "packed") < plain_bytes * 3 / 4
        assert packed.verify("packed").ok
    # A saver that does not compress reads them all the same, history included.
    with RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix, compression=None) as reader:
        graph = builder.compile(checkpointer=reader)
        assert texts(graph.get_state(config).values) == texts(out)
        assert len(list(graph.get_state_history(config))) == len(
            list(graph.get_state_history({"configurable": {"thread_id": "plain"}}))
        )


def seal_value(saver: RedisSaver, thread_id: str, field: str, type_: str, data: bytes) -> bytes:
    body = msgpack.packb([type_, data], use_bin_type=True)
    return saver.core.envelope.seal(KeySchema.identity("bl", thread_id, field), body)


def bomb(packer: Any) -> bytes:
    """A compressed gigabyte of zeros, made without ever holding it."""
    chunk = bytes(1 << 20)
    return b"".join([*(packer.compress(chunk) for _ in range(1024)), packer.flush()])


@pytest.mark.parametrize(
    ("name", "forged"),
    [
        # 1 GB of zeros (a few KB compressed) under a type that claims 1 KB
        ("bomb", lambda: (1000, bomb(zstandard.ZstdCompressor().compressobj()))),
        ("bomb-zlib", lambda: (1000, bomb(zlib.compressobj()))),
        # a frame whose header states its size: python-zstandard's one-shot decompress
        # allocates what the header says whatever max_output_size asks
        ("bomb-sized", lambda: (10, bomb(zstandard.ZstdCompressor().compressobj(size=1 << 30)))),
        ("over-the-cap", lambda: (MAX_BYTES + 1, zlib.compress(b"x"))),
        ("shorter", lambda: (5000, zlib.compress(b"short"))),
    ],
)
def test_a_forged_compressed_value_is_damage_not_a_bomb(
    saver: RedisSaver,
    redis_client: redis.Redis,
    caplog: pytest.LogCaptureFixture,
    name: str,
    forged: Any,
) -> None:
    """Someone who can write to Redis (and knows xxh3 is no MAC) stores a value that
    verifies but decompresses to far more than it names: the read falls back past it."""
    builder = graphs.react_graph(rounds=1)
    config: dict[str, Any] = {"configurable": {"thread_id": name}}
    graph = builder.compile(checkpointer=saver)
    graph.invoke(graphs.react_input(), config)
    newest = saver.get_tuple(config)
    field = saver.keys.blob_field("", "messages", newest.checkpoint["channel_versions"]["messages"])
    size, data = forged()
    alg = "zstd" if name.startswith("bomb") and name != "bomb-zlib" else "zlib"
    record = seal_value(saver, name, field, f"{MARK}/{alg}/{size}/msgpack", data)
    redis_client.hset(saver.keys.thread(name).bl, field, record)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB
    with caplog.at_level(logging.WARNING, "langgraph_durable"):
        fallback = saver.get_tuple(config)
    assert fallback is not None and fallback.checkpoint["id"] != newest.checkpoint["id"]
    assert "undecompressable" in caplog.text
    grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak
    assert grown < 256 * 1024, f"the read held {grown // 1024} MB: decompressed past its size"


def test_a_compressed_record_is_verified_before_it_is_decompressed(
    redis_url: str, key_prefix: str, redis_client: redis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    with RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix, compression="zstd") as s:
        graph = graphs.react_graph(rounds=2, payload=3000, realistic=True).compile(checkpointer=s)
        config: dict[str, Any] = {"configurable": {"thread_id": "t"}}
        graph.invoke(graphs.react_input(), config)
        newest = s.get_tuple(config)
        field = s.keys.blob_field("", "messages", newest.checkpoint["channel_versions"]["messages"])
        key = s.keys.thread("t").bl
        redis_client.hset(key, field, flipped(redis_client.hget(key, field), at=-40))
        with caplog.at_level(logging.WARNING, "langgraph_durable"):
            assert s.get_tuple(config).checkpoint["id"] != newest.checkpoint["id"]
        assert "checksum mismatch" in caplog.text and "undecompressable" not in caplog.text


def test_compression_settings_and_forms() -> None:
    with pytest.raises(ConfigurationError, match="compression must be"):
        RedisSaver(redis.Redis(), compression="gzip")
    packer = Compression("zlib", min_bytes=100)
    assert packer.pack("msgpack", b"x" * 99) == ("msgpack", b"x" * 99)  # too small to pay
    incompressible = random.Random(0).randbytes(512)
    assert packer.pack("msgpack", incompressible) == ("msgpack", incompressible)
    type_, data = packer.pack("msgpack", b"abc" * 1000)
    assert type_ == f"{MARK}/zlib/3000/msgpack" and len(data) < 100
    assert Compression.unpack(type_, data) == ("msgpack", b"abc" * 1000)
    assert Compression.unpack("msgpack", b"raw") == ("msgpack", b"raw")
    for bad in (f"{MARK}/zlib/x/msgpack", f"{MARK}/zlib", f"{MARK}/zlib/-1/msgpack"):
        with pytest.raises(RecordDamagedError, match="undecompressable"):
            Compression.unpack(bad, data)
    with pytest.raises(RecordDamagedError, match="unknown algorithm"):
        Compression.unpack(f"{MARK}/brotli/3000/msgpack", data)
