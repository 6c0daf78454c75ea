"""The record envelope: the only place stored bytes are checksummed, signed and verified.

Every record the saver stores (checkpoint, channel value, pending write, ledger entry)
is ``seal``-ed before it is written and ``open``-ed before a single byte of it reaches
a deserializer::

    b"LD" | format version (1 byte) | algorithm (1 byte) | [key id (4 bytes)] | digest | body

The digest covers the record's identity (the saver's key prefix, record kind, thread id,
hash field: namespace, checkpoint id, channel and version, or task and index) and the
body, so a valid record copied under another key, into another thread or under another
key prefix fails verification too.

Format versions: 2 (written now) binds the key prefix; 1 (written by 0.1) does not and
is still read, so existing data stays readable; ``resign`` rewrites it as version 2.

Algorithms:
  * ``XXH3_128`` (1): a fast non-cryptographic checksum against torn writes, bit rot,
    truncation and bad restores. About 3 µs for 150 KB, ~1% of serializing it.
  * ``HMAC_SHA256`` (2): with ``signing_key``; only a holder of a key can produce a
    record that verifies, so whoever can write to Redis cannot feed the serializer.
    The 4-byte key id (the first bytes of SHA-256 of the key) picks the verifying key,
    which is how rotation works: the first key signs, every key listed verifies.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Sequence

import xxhash

from langgraph_durable.core.errors import RecordDamagedError

MAGIC = b"LD"
FORMAT_VERSION = 2
_PREFIX_UNBOUND_VERSION = 1  # read only: its digest leaves out the key prefix
XXH3_128 = 1
HMAC_SHA256 = 2
_DIGEST_SIZE = {XXH3_128: 16, HMAC_SHA256: 32}
_KEY_ID_SIZE = 4
# What every record sealed now begins with, by algorithm (made once, not per record)
_SEALED_XXH3 = MAGIC + bytes((FORMAT_VERSION, XXH3_128))
_SEALED_HMAC = MAGIC + bytes((FORMAT_VERSION, HMAC_SHA256))
# Up to this size a body is copied after its identity and hashed in one call (cheaper
# than making a hasher); a bigger one is hashed where it lies, not copied.
_ONE_SHOT_MAX = 8192
_xxh3_128_digest = xxhash.xxh3_128_digest


def _key_id(key: bytes) -> bytes:
    return hashlib.sha256(key).digest()[:_KEY_ID_SIZE]


def _framed(identity: bytes) -> bytes:
    # Length-prefixed so that (identity, body) pairs can never be re-split differently.
    return len(identity).to_bytes(4, "big") + identity


class Envelope:
    """Seals and opens records of one key prefix. Stateless apart from the signing keys."""

    def __init__(
        self,
        signing_key: bytes | str | Sequence[bytes | str] | None = None,
        key_prefix: str = "",
        *,
        accept_format_1: bool = True,
    ) -> None:
        keys: list[bytes]
        if signing_key is None:
            keys = []
        elif isinstance(signing_key, (bytes, str)):
            keys = [signing_key.encode() if isinstance(signing_key, str) else signing_key]
        else:
            keys = [k.encode() if isinstance(k, str) else bytes(k) for k in signing_key]
        for key in keys:
            if len(key) < 16:
                raise ValueError("a signing_key must be at least 16 bytes long")
        self._keys = {_key_id(k): k for k in keys}
        self._signing = (_key_id(keys[0]), keys[0]) if keys else None
        self.key_prefix = key_prefix
        self._prefix = _framed(key_prefix.encode())
        # Format 1 does not bind the key prefix: once ``resign`` has rewritten every record,
        # refusing it keeps old records from being copied in from another prefix.
        self._versions = (
            (FORMAT_VERSION, _PREFIX_UNBOUND_VERSION) if accept_format_1 else (FORMAT_VERSION,)
        )

    @property
    def signing_keys(self) -> tuple[bytes, ...]:
        """The signing keys, newest first (elements.py derives its digest keys from them)."""
        return tuple(self._keys.values())

    @property
    def signed(self) -> bool:
        return self._signing is not None

    def _bound(self, version: int, identity: bytes) -> bytes:
        framed = _framed(identity)
        return framed if version == _PREFIX_UNBOUND_VERSION else self._prefix + framed

    def seal(self, identity: bytes, body: bytes | memoryview) -> bytes:
        # _bound(FORMAT_VERSION, identity), written out: a put seals several records
        if self._signing is None:
            if len(body) <= _ONE_SHOT_MAX:  # one call, no hasher made: the usual record
                digest = _xxh3_128_digest(
                    b"".join((self._prefix, len(identity).to_bytes(4, "big"), identity, body))
                )
                return b"".join((_SEALED_XXH3, digest, body))
            hasher = xxhash.xxh3_128(
                b"".join((self._prefix, len(identity).to_bytes(4, "big"), identity))
            )
            hasher.update(body)
            return b"".join((_SEALED_XXH3, hasher.digest(), body))
        bound = b"".join((self._prefix, len(identity).to_bytes(4, "big"), identity))
        key_id, key = self._signing
        mac = hmac.new(key, bound, hashlib.sha256)
        mac.update(body)
        return b"".join((_SEALED_HMAC, key_id, mac.digest(), body))

    def is_current(self, record: bytes) -> bool:
        """Whether ``record`` is sealed as ``seal`` would seal it now (format version,
        algorithm and signing key); says nothing about whether it verifies."""
        if len(record) < 8 or record[:2] != MAGIC or record[2] != FORMAT_VERSION:
            return False
        if self._signing is None:
            return record[3] == XXH3_128
        return record[3] == HMAC_SHA256 and record[4 : 4 + _KEY_ID_SIZE] == self._signing[0]

    def open(self, identity: bytes, record: bytes | None) -> bytes | memoryview:
        """Return the body of a record that verifies (a view into ``record``), or raise
        ``RecordDamagedError``."""
        if record is None:
            raise RecordDamagedError("missing")
        if len(record) < 4:
            raise RecordDamagedError("truncated")
        if record[:2] != MAGIC:
            raise RecordDamagedError("not a langgraph-durable record")
        version = record[2]
        if version not in self._versions:
            raise RecordDamagedError(
                "unknown format version 1 (accept_format_1=False)"
                if version == _PREFIX_UNBOUND_VERSION
                else f"unknown format version {version}"
            )
        algorithm = record[3]
        if algorithm not in _DIGEST_SIZE:
            raise RecordDamagedError(f"unknown algorithm {algorithm}")
        if algorithm == XXH3_128:
            if self._signing is not None:
                raise RecordDamagedError("bad signature: record is not signed")
            start = 4 + _DIGEST_SIZE[XXH3_128]
            if len(record) < start:
                raise RecordDamagedError("truncated")
            body = memoryview(record)[start:]  # no copy of what may be a large value
            digest = xxhash.xxh3_128(self._bound(version, identity))
            digest.update(body)
            if not hmac.compare_digest(digest.digest(), record[4:start]):
                raise RecordDamagedError("checksum mismatch")
            return body
        start = 4 + _KEY_ID_SIZE + _DIGEST_SIZE[HMAC_SHA256]
        if len(record) < start:
            raise RecordDamagedError("truncated")
        key = self._keys.get(record[4 : 4 + _KEY_ID_SIZE])
        if key is None:
            raise RecordDamagedError(
                "bad signature: no signing_key configured"
                if not self._keys
                else "bad signature: signed with an unknown key"
            )
        body = memoryview(record)[start:]
        mac = hmac.new(key, self._bound(version, identity), hashlib.sha256)
        mac.update(body)
        if not hmac.compare_digest(mac.digest(), record[4 + _KEY_ID_SIZE : start]):
            raise RecordDamagedError("bad signature")
        return body
