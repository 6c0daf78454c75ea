"""Key chores the tests repeat: glob escaping, deleting what a test made, damaging a record."""

from __future__ import annotations

from typing import Any

import redis


def glob_escape(text: str) -> str:
    """``text`` as a literal inside a SCAN MATCH pattern (key prefixes and thread ids may
    hold ``*?[]\\``; ``{}`` of the hash tag are no glob characters)."""
    return "".join("\\" + c if c in "*?[]\\" else c for c in text)


def delete_matching(client: redis.Redis, pattern: str) -> int:
    """Delete every key matching ``pattern``, 500 per UNLINK; how many were deleted."""
    removed, batch = 0, []
    for key in client.scan_iter(match=pattern, count=1000):
        batch.append(key)
        if len(batch) >= 500:
            removed += client.unlink(*batch)
            batch.clear()
    if batch:
        removed += client.unlink(*batch)
    return removed


def delete_prefix(client: redis.Redis, prefix: str) -> None:
    """Delete only the keys of ``prefix`` (a test's own unique key prefix)."""
    delete_matching(client, glob_escape(prefix) + ":*")


def flipped(record: bytes, at: int = -1, mask: int = 1) -> bytes:
    """``record`` with the bits of ``mask`` flipped in its byte at ``at``."""
    damaged = bytearray(record)
    damaged[at] ^= mask
    return bytes(damaged)


def flip_last_bit(client: Any, key: str, field: Any) -> None:
    """Damage the stored record ``key[field]`` by one bit of its last byte."""
    client.hset(key, field, flipped(client.hget(key, field)))
