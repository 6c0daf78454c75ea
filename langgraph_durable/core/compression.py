"""Compression of stored values: the one place values are compressed and decompressed.

Owns the compressed form of a channel value or pending write. Rules it keeps:
  * Only a value's serialized bytes are compressed, from ``min_bytes`` on, and only
    where it saves at least an eighth; checkpoints and metadata stay as they are.
  * The record envelope checksums (or signs) the compressed bytes: a record is verified
    before one byte of it is decompressed (``codec.py`` opens, then calls ``unpack``).
  * A compressed value names its algorithm and its size in its serialization type,
    ``lgdz1/<algorithm>/<size>/<type>``. Decompression stops at that size, which is
    never over ``MAX_BYTES`` (Redis's largest value, so no more than an uncompressed
    record could make a reader hold): a damaged or hostile record cannot become a
    decompression bomb. A reader without this module refuses the type (damage that may
    be configuration, never misread). A zstd frame header that states another size is
    refused before anything is allocated.
  * zstd (``zstandard``, a dependency), else zlib from the standard library; a reader
    without zstandard reports zstd records as configuration, never as damage.
"""

from __future__ import annotations

import threading
import zlib
from typing import Any

from langgraph_durable.core.errors import ConfigurationError, RecordDamagedError
from langgraph_durable.core.inputs import MAX_RECORD_BYTES

try:  # pragma: no cover - depends on the environment
    import zstandard
except ImportError:  # pragma: no cover
    zstandard = None

MARK = "lgdz1"
MAX_BYTES = MAX_RECORD_BYTES
ALGORITHMS = ("zstd", "zlib")
DEFAULT_MIN_BYTES = 1024  # below, the frame header eats most of the gain


def available(algorithm: str) -> bool:
    return algorithm == "zlib" or (algorithm == "zstd" and zstandard is not None)


def resolve(setting: str | None) -> str | None:
    """The algorithm a ``compression`` option names: "auto" is zstd where installed,
    else zlib; None is none."""
    if setting is None:
        return None
    if setting == "auto":
        return "zstd" if available("zstd") else "zlib"
    if setting not in ALGORITHMS:
        raise ConfigurationError(
            f"compression must be 'auto', 'zstd', 'zlib' or None, got {setting!r}"
        )
    if not available(setting):
        raise ConfigurationError(
            "compression='zstd' needs the zstandard package: pip install zstandard"
        )
    return setting


_decompressors = threading.local()  # a ZstdDecompressor must not be shared by threads


def _zstd_decompressor() -> Any:
    decompressor = getattr(_decompressors, "zstd", None)
    if decompressor is None:
        decompressor = _decompressors.zstd = zstandard.ZstdDecompressor()
    return decompressor


def _zstd_bounded(data: bytes, size: int) -> bytes:
    """At most ``size`` + 1 bytes of a zstd frame. The one-shot ``decompress`` allocates
    what a frame's header states, whatever ``max_output_size`` asks, so a header is
    checked against ``size`` and the frame is read as a stream that stops past it."""
    stated = zstandard.frame_content_size(data)
    if stated not in (-1, size):  # -1: the frame does not state its size
        raise ValueError(f"frame states {stated} bytes")
    with _zstd_decompressor().stream_reader(data, read_across_frames=False) as reader:
        return reader.read(size + 1)  # type: ignore[no-any-return]


class Compression:
    """Compresses values on write with one algorithm; decompresses any it knows."""

    def __init__(self, algorithm: str | None, min_bytes: int = DEFAULT_MIN_BYTES) -> None:
        self.algorithm = algorithm
        self.min_bytes = min_bytes
        self._local = threading.local()  # a ZstdCompressor must not be shared by threads

    def _zstd(self) -> Any:
        compressor = getattr(self._local, "zstd", None)
        if compressor is None:
            compressor = self._local.zstd = zstandard.ZstdCompressor(level=3)
        return compressor

    def pack(self, type_: str, data: bytes) -> tuple[str, bytes]:
        """The (type, bytes) to store for a serialized value."""
        size = len(data)
        if self.algorithm is None or size < self.min_bytes or size > MAX_BYTES:
            return type_, data
        if self.algorithm == "zstd":
            packed = self._zstd().compress(data)
        else:
            packed = zlib.compress(data, 6)
        if len(packed) > size - size // 8:
            return type_, data
        return f"{MARK}/{self.algorithm}/{size}/{type_}", packed

    @staticmethod
    def unpack(type_: Any, data: Any) -> tuple[Any, Any]:
        """The serialized (type, bytes) of a verified record's value; raises
        ``RecordDamagedError`` for a compressed value that does not decompress to the
        size it names."""
        if not isinstance(type_, str) or not type_.startswith(MARK + "/"):
            return type_, data
        try:
            _, algorithm, size_text, inner = type_.split("/", 3)
            size = int(size_text)
        except ValueError:
            raise RecordDamagedError("undecompressable: malformed compressed type") from None
        if not 0 <= size <= MAX_BYTES:
            raise RecordDamagedError(f"undecompressable: names {size} bytes")
        if not available(algorithm):
            raise RecordDamagedError(
                f"unknown algorithm {algorithm[:20]!r} (compressed value"
                + ("; pip install zstandard)" if algorithm == "zstd" else ")")
            )
        try:
            if algorithm == "zstd":
                out = _zstd_bounded(bytes(data), size)
            else:
                inflater = zlib.decompressobj()
                out = inflater.decompress(bytes(data), size)
                if not inflater.eof or inflater.unconsumed_tail:
                    raise ValueError("longer than it says")
        except (ValueError, zlib.error, getattr(zstandard, "ZstdError", ValueError)) as exc:
            raise RecordDamagedError(f"undecompressable: {exc}"[:120]) from None
        if len(out) != size:
            raise RecordDamagedError(f"undecompressable: {len(out)} bytes, not {size}")
        return inner, out
