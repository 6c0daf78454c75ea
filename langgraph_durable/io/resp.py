"""Commands in RESP, packed in one write: what ``wire.py`` sends.

Owns turning a batch of commands into the bytes redis-py would send for them, with
less work per argument: by hiredis's packer where redis-py would use it, else in one
join (``resp``). Anything only redis-py knows how to convert (a float, a bool, a
subclass, a memoryview) is left to the connection's own packer, so the bytes on the
wire are always the ones redis-py would have sent.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import chain, repeat
from typing import Any

try:  # redis-py packs with hiredis when it is installed; so do we, without its wrapper
    from hiredis import pack_command as _hiredis_pack
    from redis.connection import HiredisRespSerializer
except ImportError:  # pragma: no cover - hiredis is optional
    _hiredis_pack = None
    HiredisRespSerializer = None  # type: ignore[assignment,misc]


def packed(conn: Any, commands: Sequence[tuple[Any, ...]]) -> list[bytes]:
    """``commands`` as ``conn.pack_commands`` would pack them, for its
    ``send_packed_command``."""
    encoder = getattr(conn, "encoder", None)
    utf8 = getattr(encoder, "encoding", None) == "utf-8" and encoder.encoding_errors == "strict"
    if _hiredis_pack is not None and (
        utf8 or isinstance(getattr(conn, "_command_packer", None), HiredisRespSerializer)
    ):
        # redis-py packs with hiredis on sync connections (str as UTF-8 whatever the
        # encoder), minus its per-argument pass here; for a UTF-8 client its pure-Python
        # packer makes the same bytes, so asyncio connections (never hiredis) get it too
        try:
            return [b"".join(map(_hiredis_pack, map(_name_split, commands)))]
        except TypeError:  # an argument hiredis does not take: redis-py converts it
            pass
    if utf8:
        try:
            return [resp(commands)]
        except TypeError:  # an argument only redis-py converts (or refuses, typed)
            pass
    return conn.pack_commands(commands)  # type: ignore[no-any-return]


def resp(commands: Sequence[tuple[Any, ...]]) -> bytes:
    """``commands`` in RESP, as redis-py's pure-Python serializer packs them for a UTF-8
    client (bytes as they are, str as UTF-8, int in decimal) in one join: its serializer
    joins its buffer again for every argument (packing a put's script call measured 89 µs
    there, 39 µs here). Each argument is made bytes by its exact type in one pass of a
    comprehension, and headers and separators are made in C (a put's call has ~60
    arguments). Anything else (a float, a bool, a subclass, a memoryview) raises
    TypeError for redis-py to handle."""
    out: list[bytes] = []
    extend = out.extend
    for args in commands:
        args = _name_split(args)
        try:  # fewer bytecodes with map(operator.call, ...), but more instructions
            parts = [_AS_BYTES[type(a)](a) for a in args]
        except KeyError as exc:
            raise TypeError(exc.args[0]) from None
        out.append(b"*%d\r\n" % len(parts))
        extend(chain.from_iterable(zip(map(_HEADERS.__getitem__, map(len, parts)), parts, _CRLFS)))
    return b"".join(out)


def _name_split(args: tuple[Any, ...]) -> tuple[Any, ...]:
    """``args`` with a command name of several words ("CONFIG GET") as that many
    arguments, as redis-py sends it; a name neither str nor bytes raises TypeError."""
    first = args[0]
    if type(first) is str:
        if first.isidentifier():  # one word ("EVALSHA", "HMGET"): nothing to split or copy
            return args
        return (*first.encode().split(), *args[1:])  # any whitespace, as redis-py
    if type(first) is not bytes:
        raise TypeError(type(first))
    return (*first.split(), *args[1:]) if b" " in first else args


_CRLFS = repeat(b"\r\n")  # zip stops at the arguments' end: never exhausted


# An argument's exact type -> its bytes (bytes(b) is b itself). A subclass, a bool, a
# float is not here: KeyError, and redis-py packs the command.
_AS_BYTES: dict[type, Callable[[Any], bytes]] = {
    bytes: bytes,
    str: str.encode,
    int: b"%d".__mod__,
}


class _Headers(dict[int, bytes]):
    """An argument's length -> its RESP header, kept for lengths under 1,024 (at most
    ~100 KB; a longer argument's copy costs more than its header): a lookup in C is
    cheaper than formatting (75k instructions against 121k for a put's call)."""

    def __missing__(self, length: int) -> bytes:
        header = b"$%d\r\n" % length
        if length < 1024:
            self[length] = header
        return header


_HEADERS = _Headers()
