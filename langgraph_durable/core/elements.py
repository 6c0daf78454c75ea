"""Linear memory for list- and dict-valued channels: each element stored once per thread.

Owns the element form of a channel value. A list worth it (``MIN_ELEMENTS`` or more
elements, ``MIN_AVERAGE_BYTES`` or more each on average once serialized: messages, not
counters) is stored as a *manifest*: the channel value's record, sealed like every
record, has the type ``lgdl1`` and holds the 16-byte BLAKE2b digests of its elements (keyed
with a key derived from ``signing_key`` where one is set: ``digest_of``) in
order; each element is stored once per thread in ``P:{T}:el`` under its digest. A
message list that grows by one message per step then costs each message once plus 16
bytes per message per checkpoint, instead of the whole list again at every checkpoint
(``add_messages``, ``operator.add``: no opting in to ``DeltaChannel``). A plain dict
whose values are worth it is stored the same way, its values the elements, its keys in
its manifest (``lgdm1``: a document merged into ``files`` per step is stored once); the
manifest formats are ``manifests.py``'s. Rules it keeps:
  * An element is verified against the digest the (verified) manifest names before one
    byte of it is used: a cryptographic digest named by a sealed record is as good as a
    seal over the element (a chat user cannot craft a message that collides with another),
    so elements carry no envelope of their own and are the same bytes in every thread.
  * An element is serialized and compressed like any value (``compression.py``), the
    digest taken over the stored bytes: verified before it is decompressed.
  * An element never changes under its digest: a process keeps the elements it stored
    or verified (``ElementCache``, bounded) and reads only the others, so a read of a
    thread's newest checkpoint moves its manifests, not its messages.
  * The elements a put may leave out are those its parent checkpoint's manifests name
    (``_NewestVersions`` remembers them): they exist while the parent does, because
    retention deletes an element only once no remaining checkpoint's manifest names it.
    ``put_checkpoint.lua`` checks that they are there and their lengths against what
    this process wrote or verified: a window of ``element_window.CHECKED_PER_PUT`` (plus as
    many as the put sends) moved on from put to put (all of them once the thread's
    quarantine holds anything), so the cost stays flat as the thread grows; with
    ``verify_elements_on_write`` every one by its very bytes (SHA-1 in Lua: O(the
    thread's element bytes) of Redis CPU per put, so not by default: a same-length
    change is then found by the first process that reads it); only that it is there
    for one this process never held
    (``ElementCache.known_as_stored``). One that is not (a field deleted, damaged
    bytes, one a reader moved to quarantine) refuses the put, which is sent again with
    every element its values hold. Elements a writer sends overwrite what is stored
    (HSET): bytes hashed to their digest can only be right, so damage never
    blocks writing the same content again.
  * Older readers refuse the ``lgdl1`` type (damage that may be configuration, never a
    misread value).
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from langgraph.checkpoint.base import SerializerProtocol
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer

from langgraph_durable.core import inputs
from langgraph_durable.core.compression import Compression
from langgraph_durable.core.element_cache import ElementCache
from langgraph_durable.core.errors import RecordDamagedError
from langgraph_durable.core.manifests import (
    DIGEST_BYTES,
    MAP_MARK,
    MARK,
    MARKS,
    MSGPACK,
    PACKED_MARK,
    PACKED_MARKS,
    Blocked,
    MapDigests,
    Split,
    digests_in,
    digests_of,
    every_digest,
    joined,
    joined_map,
    may_be_manifest,
    msgpack_elements,
    msgpack_map_items,
    named_by,
    with_digests,
)
from langgraph_durable.core.split_memo import Remembered, SplitMemo

__all__ = [  # the manifest names readers take from here (manifests.py owns them)
    "DIGEST_BYTES",
    "MAP_MARK",
    "MARK",
    "MARKS",
    "PACKED_MARK",
    "PACKED_MARKS",
    "ElementCache",
    "MapDigests",
    "Split",
    "digests_in",
    "digests_of",
    "joined",
    "joined_map",
    "may_be_manifest",
    "with_digests",
]  # fmt: skip
MIN_ELEMENTS = 2
MIN_AVERAGE_BYTES = 64  # below, 16 bytes of digest per element and a hash field cost more


class ElementDamagedError(RecordDamagedError):
    """An element a manifest names is missing or not the bytes it names. The manifest
    itself verified: it is not moved to quarantine (other checkpoints may share it), nor
    are the checkpoints naming it; a damaged element is (a writer that holds its bytes
    writes it again: ``put_checkpoint.lua`` checks every element a put names)."""

    def __init__(self, reason: str, digest: bytes = b"") -> None:
        super().__init__(reason)
        self.digest = digest


def element_keys(signing_keys: Iterable[bytes]) -> tuple[bytes, ...]:
    """The keys element digests are taken with, newest first: one derived from each
    signing key (never the signing key itself); none without ``signing_key``."""
    return tuple(
        hmac.new(k, b"langgraph-durable element digest", hashlib.sha256).digest()
        for k in signing_keys
    )


def digest_of(stored: bytes, key: bytes = b"") -> bytes:
    """The digest a manifest names ``stored`` by: BLAKE2b-128, keyed with the newest
    element key where ``signing_key`` is set (no one without the key can compute a
    digest, let alone craft two messages that share one)."""
    return hashlib.blake2b(stored, digest_size=DIGEST_BYTES, key=key).digest()


def key_of(digest: bytes, stored: bytes, keys: Sequence[bytes]) -> bytes | None:
    """The element key (``b""``: none) ``digest`` was taken with over ``stored``, or None
    if no key makes it. Unkeyed digests (written before ``signing_key``) still verify: a
    keyed digest cannot be met by unkeyed bytes short of a 2^128 second preimage."""
    for key in (*keys, b""):
        if hmac.compare_digest(digest_of(stored, key), digest):
            return key
    return None


def _encryption(serde: SerializerProtocol) -> tuple[SerializerProtocol, Any]:
    """(the serializer inside, its cipher) for LangGraph's ``EncryptedSerializer``; else
    (``serde``, None)."""
    # by its class: isinstance with a Protocol's subclass runs typing's check in Python;
    # and that answer kept by class (a split asks at every put and write)
    kind = type(serde)
    encrypted = _ENCRYPTED.get(kind)
    if encrypted is None:
        encrypted = _ENCRYPTED[kind] = issubclass(kind, EncryptedSerializer)
    if encrypted:
        return serde.serde, serde.cipher  # type: ignore[attr-defined]
    return serde, None


_ENCRYPTED: dict[type, bool] = {}  # serializer class -> whether it is an EncryptedSerializer


def decrypted(serde: SerializerProtocol, type_: str, data: bytes) -> tuple[str, bytes] | None:
    """The plaintext serialization of an element an ``EncryptedSerializer`` stored, so a
    reader knows it by content as its writer did (``split``); None for anything else or
    what does not decrypt (the load reports that)."""
    _, cipher = _encryption(serde)
    base, plus, name = type_.partition("+")
    if cipher is None or not plus:
        return None
    try:
        return base, cipher.decrypt(name, data)
    except Exception:  # noqa: BLE001 - a wrong key, a forged ciphertext: the load says so
        return None


def split(
    serde: SerializerProtocol,
    compression: Compression,
    value: Any,
    cache: ElementCache,
    *,
    thread_id: str,
    what: str,
    limit: int,
    min_elements: int = MIN_ELEMENTS,
    keys: Sequence[bytes] = (),
    memo: SplitMemo | None = None,
    memo_key: str = "",
) -> tuple[Split | None, tuple[str, bytes] | None]:
    """``value`` in element form, or None when it is not a list worth splitting, with
    the whole value serialized when that was done on the way (None otherwise). A
    pending write splits from one element on: the message it appends is the element the
    next checkpoint's manifest names, stored once for both. An element this process
    stored or read before costs its serialization only (``cache``); with ``memo``, the
    entries a value shares with the one split before under ``memo_key`` (its namespace
    and channel) cost nothing more (``split_memo.py``). With an ``EncryptedSerializer``,
    an element is known by its plaintext serialization (in memory only) and encrypted
    once: a fresh ciphertext at every checkpoint would store every message again each
    time."""
    mapping = type(value) is dict
    if not (mapping and value) and (type(value) is not list or len(value) < min_elements):
        return None, None
    plain_serde, cipher = _encryption(serde)
    whole = plain_serde.dumps_typed(value)
    remembered_as = (thread_id, memo_key or what, keys[0] if keys else b"", mapping)
    before = memo.prefix(remembered_as, whole, len(value), mapping) if memo is not None else None
    map_keys: tuple[bytes, ...] | None = None
    if before is not None:
        known, tail = before
        serialized = [(MSGPACK, entry[-1]) for entry in tail]
        if mapping:
            map_keys = (*(known.keys or ()), *(entry[0] for entry in tail))
        value_bytes = known.value_bytes + sum(len(entry[-1]) for entry in tail)
    elif mapping:  # each value an element, the keys in the manifest
        items = msgpack_map_items(whole, len(value))
        if items is None:
            return None, None if cipher is not None else whole
        map_keys = tuple(k for k, _ in items)
        serialized = [(MSGPACK, v) for _, v in items]
    else:
        parts = msgpack_elements(whole, len(value))
        serialized = (
            [(MSGPACK, part) for part in parts]
            if parts is not None
            else [plain_serde.dumps_typed(element) for element in value]
        )
    if before is None:
        value_bytes = sum(len(data) for _, data in serialized)
    plain_whole, whole = whole, (None if cipher is not None else whole)  # plaintext: never stored
    if value_bytes < MIN_AVERAGE_BYTES * len(value):
        return None, whole
    digests: list[bytes] = list(before[0].digests) if before is not None else []
    stored: dict[bytes, bytes] = dict(before[0].stored) if before is not None else {}
    size = before[0].size if before is not None else 0
    generation = cache.fingerprints_generation
    if before is not None and before[0].noted != generation:
        for digest in digests:  # remembered: their fingerprints too, as those were reset
            cache.note_stored(digest, stored[digest])
    for type_, data in serialized:
        plain = b"".join((type_.encode(), b"\x00", data))
        found = cache.by_content(plain)
        if found is None:
            sealed_type, sealed = type_, data
            if cipher is not None:
                name, sealed = cipher.encrypt(data)
                sealed_type = f"{type_}+{name}"
            packed_type, packed_data = compression.pack(sealed_type, sealed)
            what_ = f"an element of {what}"
            inputs.record_size(len(packed_data), thread_id=thread_id, what=what_, limit=limit)
            packed = (
                plain
                if packed_data is data
                else b"".join((packed_type.encode(), b"\x00", packed_data))
            )
            digest = digest_of(packed, keys[0] if keys else b"")
            found = cache.add(digest, type_, data, plain, packed)  # type: ignore[assignment]
        cache.note_stored(*found)
        digests.append(found[0])
        stored[found[0]] = found[1]
        size += len(data) + len(found[1])
    made = Split(tuple(digests), stored, map_keys)
    if memo is not None:
        memo.remember(
            remembered_as,
            plain_whole,
            mapping,
            Remembered(
                len(value),
                made.digests,
                stored,
                map_keys,
                value_bytes,
                size,
                generation if cache.fingerprints_generation == generation else -1,
            ),
        )
    return made, whole


def unpack(digest: bytes, stored: bytes | None, keys: Sequence[bytes] = ()) -> tuple[str, bytes]:
    """(serialization type, data) of the element stored under ``digest``, verified with
    any of the element ``keys`` or none (``key_of``)."""
    if stored is None:
        raise ElementDamagedError(f"missing element {digest.hex()}", digest)
    if key_of(digest, stored, keys) is None:
        raise ElementDamagedError(f"checksum mismatch element {digest.hex()}", digest)
    type_, _, data = stored.partition(b"\x00")
    try:
        return type_.decode(), data
    except UnicodeDecodeError as exc:  # verified, so only a digest collision could: never
        raise ElementDamagedError(f"undecodable body element {digest.hex()}", digest) from exc


class ValueRecords(dict[str, "bytes | None"]):
    """Channel value records by blob field, with the elements read for their manifests
    (digest -> stored element, None where Redis had none), the manifests already
    opened and verified (blob field -> digests), so none is verified twice, and the
    digests the manifests of pending writes name (write member -> digests)."""

    def __init__(self, *args: Any, trust_cache: bool = True) -> None:
        super().__init__(*args)
        # False: every element must be in Redis (verify, retention's pin), not only here.
        self.trust_cache = trust_cache
        self.elements: dict[bytes, bytes | None] = {}
        self.manifests: dict[str, tuple[bytes, ...]] = {}
        self.write_manifests: dict[str, tuple[bytes, ...]] = {}
        # blocked manifests opened whose blocks are not all read or verified (blocks.py)
        self.unexpanded: dict[str, Blocked] = {}
        # the cache's contents a read relied on instead of reading from Redis: a full
        # cache is emptied by replacing its dict, so these stay whole until loaded
        self.held: list[dict[bytes, tuple[str, bytes]]] = []

    def merge(self, other: Mapping[str, bytes | None]) -> None:
        self.update(other)
        if isinstance(other, ValueRecords):
            self.elements.update(other.elements)
            self.manifests.update(other.manifests)
            self.write_manifests.update(other.write_manifests)
            self.unexpanded.update(other.unexpanded)
            self.held += [h for h in other.held if not any(h is mine for mine in self.held)]

    def wanted_elements(
        self, cache: ElementCache, manifests: Iterable[tuple[bytes, ...]] | None = None
    ) -> list[bytes]:
        """Digests the opened manifests (or only ``manifests``) name that were not read
        yet (and are not cached, where the cache is trusted: what is, this read keeps)."""
        if manifests is None:
            manifests = (*self.manifests.values(), *self.write_manifests.values())
            manifests = (*manifests, *map(tuple, self.unexpanded.values()))
        unread = named_by(manifests) - self.elements.keys()
        if not self.trust_cache:
            return sorted(unread)
        contents = cache.contents()
        if not any(contents is h for h in self.held):
            self.held.append(contents)
        return sorted(unread.difference(contents))

    def cached(self, cache: ElementCache, digest: bytes) -> tuple[str, bytes] | None:
        """The element held for ``digest`` (where the cache is trusted), if any."""
        if not self.trust_cache:
            return None
        found = cache.get(digest)
        if found is None:
            for contents in self.held:
                if (found := contents.get(digest)) is not None:
                    break
        return found

    def lacking(self, cache: ElementCache) -> set[str]:
        """Blob fields without a record, and blob fields and write members whose manifest
        names an element Redis lacked (and ``cache`` too)."""
        gone = {
            d
            for d, e in self.elements.items()
            if e is None and (not self.trust_cache or cache.get(d) is None)
        }
        named = [(f, every_digest(d)) for f, d in self.manifests.items()]
        named += [
            *self.write_manifests.items(),
            *((f, tuple(b)) for f, b in self.unexpanded.items()),
        ]
        return {f for f, record in self.items() if record is None} | {
            f for f, digests in named if gone.intersection(digests)
        }
