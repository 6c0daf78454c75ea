"""The manifest formats: how a list or a dict in element form is named in its record.

Owns the two manifest types and their data (``elements.py`` owns splitting values into
elements and storing them): ``lgdl1``, a list's, is its elements' digests in order;
``lgdm1``, a dict's, is its entry count (4 bytes), its keys as msgpack packs them, then
one digest per value. Reading one (``digests_in``) never trusts it beyond its seal:
anything that does not parse exactly is ``RecordDamagedError``. A list or dict is
rebuilt as the msgpack LangGraph would have written whole (``joined``, ``joined_map``),
so one call deserializes it, through the allowlist.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from itertools import pairwise
from typing import Any

import msgpack
from typing_extensions import Self

from langgraph_durable.core.errors import RecordDamagedError

DIGEST_BYTES = 16

MARK = "lgdl1"  # the serialization type of a list's manifest
MAP_MARK = "lgdm1"  # of a dict's manifest: its keys, and its values' digests
MARKS = (MARK, MAP_MARK)
PACKED_MARK = b"\xa5" + MARK.encode()  # how msgpack writes it inside a record's body
PACKED_MARKS = (PACKED_MARK, b"\xa5" + MAP_MARK.encode())


class MapDigests(tuple[bytes, ...]):
    """The digests a dict's manifest names, in its order, with its ``keys`` (each as
    msgpack packs it): what every reader of digests reads, and what rebuilds the dict."""

    keys: tuple[bytes, ...]

    def __new__(cls, digests: Iterable[bytes], keys: tuple[bytes, ...]) -> Self:
        made = super().__new__(cls, digests)
        made.keys = keys
        return made


MSGPACK = "msgpack"  # LangGraph's serialization type whose arrays are their elements' bytes


def msgpack_elements(whole: tuple[str, bytes], count: int) -> list[bytes] | None:
    """The bytes of each element of a list LangGraph serialized as one msgpack array
    (msgpack is context-free: an element's bytes are what serializing it alone gives),
    or None for another serialization."""
    parts = _msgpack_parts(whole, count, per_entry=1, mapping=False)
    return None if parts is None else [entry[0] for entry in parts]


def msgpack_map_items(whole: tuple[str, bytes], count: int) -> list[tuple[bytes, bytes]] | None:
    """The (key, value) bytes of each entry of a dict LangGraph serialized as one msgpack
    map, or None for another serialization."""
    parts = _msgpack_parts(whole, count, per_entry=2, mapping=True)
    return None if parts is None else [(key, value) for key, value in parts]


def _msgpack_parts(
    whole: tuple[str, bytes], count: int, *, per_entry: int, mapping: bool
) -> list[tuple[bytes, ...]] | None:
    """The bytes of each of the ``count`` entries (``per_entry`` objects each) of a msgpack
    array or map that is the whole of ``whole``, or None."""
    type_, data = whole
    if type_ != MSGPACK:
        return None
    try:
        unpacker = msgpack.Unpacker(max_buffer_size=len(data) + 1)
        unpacker.feed(data)
        header = unpacker.read_map_header() if mapping else unpacker.read_array_header()
        if header != count:
            return None
        return _entries(unpacker, data, 0, count, per_entry)
    except (ValueError, msgpack.UnpackException):
        return None


def msgpack_tail(
    data: bytes, start: int, count: int, per_entry: int
) -> list[tuple[bytes, ...]] | None:
    """The bytes of the ``count`` entries (``per_entry`` objects each) that ``data`` holds
    from ``start`` to its very end, or None (``split_memo.py``: what follows the entries
    a put split before)."""
    try:
        unpacker = msgpack.Unpacker(max_buffer_size=len(data) - start + 1)
        unpacker.feed(data[start:])
        return _entries(unpacker, data, start, count, per_entry)
    except (ValueError, msgpack.UnpackException):
        return None


def _entries(
    unpacker: msgpack.Unpacker, data: bytes, fed_from: int, count: int, per_entry: int
) -> list[tuple[bytes, ...]] | None:
    """The next ``count`` entries ``unpacker`` (fed ``data[fed_from:]``) holds, which must
    end exactly where ``data`` does."""
    entries, start = [], fed_from + unpacker.tell()
    for _ in range(count):
        bounds = [start]
        for _ in range(per_entry):
            unpacker.skip()
            bounds.append(fed_from + unpacker.tell())
        entries.append(tuple(data[a:b] for a, b in pairwise(bounds)))
        start = bounds[-1]
    return entries if start == len(data) else None


def joined_map(
    keys: Sequence[bytes], types: Sequence[str], parts: Sequence[bytes]
) -> tuple[str, bytes]:
    """The msgpack map of ``keys`` (as msgpack packs them) and their values serialized one
    by one as msgpack: what the dict serialized whole was (one call deserializes it)."""
    if types.count(MSGPACK) != len(types) or len(keys) != len(parts):
        raise RecordDamagedError("undecodable body (a dict element not msgpack)")
    entries = b"".join(b"".join(pair) for pair in zip(keys, parts))
    return MSGPACK, b"\xdf" + len(parts).to_bytes(4, "big") + entries


def joined(types: Sequence[str], parts: Sequence[bytes]) -> tuple[str, bytes] | None:
    """The msgpack array of elements serialized one by one as msgpack (their types and
    bytes): one call deserializes them all (the inverse of ``msgpack_elements``); None
    if one is not msgpack."""
    if types.count(MSGPACK) != len(types):
        return None
    return MSGPACK, b"".join((b"\xdd" + len(parts).to_bytes(4, "big"), *parts))


def digests_in(type_: str, manifest: Any) -> tuple[bytes, ...]:
    """The element digests a verified manifest of type ``type_`` names, in order (a
    dict's: ``MapDigests``, with its keys); ``RecordDamagedError`` if it is not one."""
    if type_ == MAP_MARK:
        return _map_digests(manifest)
    return digests_of(manifest)


def _map_digests(manifest: Any) -> MapDigests:
    """A dict's manifest: its entry count (4 bytes), its keys as msgpack packs them, then
    one digest per entry; anything else is damage."""
    if not isinstance(manifest, bytes) or len(manifest) < 4:
        raise RecordDamagedError("undecodable body (not a manifest)")
    count = int.from_bytes(manifest[:4], "big")
    keys_end = len(manifest) - count * DIGEST_BYTES
    if count == 0 or keys_end < 4:
        raise RecordDamagedError("undecodable body (not a manifest)")
    keys: list[bytes] = []
    try:
        unpacker = msgpack.Unpacker(max_buffer_size=keys_end)
        unpacker.feed(manifest[4:keys_end])
        start = 0
        for _ in range(count):
            unpacker.skip()
            end = unpacker.tell()
            keys.append(manifest[4 + start : 4 + end])
            start = end
    except (ValueError, msgpack.UnpackException) as exc:
        raise RecordDamagedError("undecodable body (not a manifest)") from exc
    if 4 + start != keys_end:
        raise RecordDamagedError("undecodable body (not a manifest)")
    digests = manifest[keys_end:]
    named = [digests[i : i + DIGEST_BYTES] for i in range(0, len(digests), DIGEST_BYTES)]
    return MapDigests(named, tuple(keys))


def with_digests(type_: str, manifest: bytes, digests: Sequence[bytes]) -> bytes:
    """``manifest`` naming ``digests`` instead (a re-keyed manifest: resign.py)."""
    if type_ == MAP_MARK:
        return manifest[: len(manifest) - len(digests) * DIGEST_BYTES] + b"".join(digests)
    return b"".join(digests)


def digests_of(manifest: Any) -> tuple[bytes, ...]:
    """The element digests a verified manifest's data names, in order."""
    if not isinstance(manifest, bytes) or len(manifest) % DIGEST_BYTES:
        raise RecordDamagedError("undecodable body (not a manifest)")
    return tuple([manifest[i : i + DIGEST_BYTES] for i in range(0, len(manifest), DIGEST_BYTES)])


def may_be_manifest(record: bytes | None, window: int = 96) -> bool:
    """Cheap test before opening: a manifest's type sits at the start of a channel
    value's body (``window``), after the channel name in a pending write's (search it
    all: ``window=-1``)."""
    if record is None:
        return False
    end = len(record) if window < 0 else window
    return any(record.find(mark, 0, end) != -1 for mark in PACKED_MARKS)
