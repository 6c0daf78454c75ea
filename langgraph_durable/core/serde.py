"""What stored bytes may turn into: the one place the saver deserializes a value.

Rules this module keeps:
  * Nothing a stored record says is executed. The default serializer is LangGraph's
    ``JsonPlusSerializer`` with its *strict* msgpack allowlist (LangGraph's safe types,
    plus what the compiled graph declares through ``with_allowlist``, plus the saver's
    ``allowed_types``), whatever ``LANGGRAPH_STRICT_MSGPACK`` says, and no pickle.
  * A record that names a type the allowlist refuses is damage: ``load`` raises
    ``RecordDamagedError``. LangGraph's strict mode would hand back the raw arguments in
    the object's place; a read here falls back to an older checkpoint instead.
  * Any other failure to deserialize a record that verified (another serializer's data,
    an ``EncryptedSerializer`` with the wrong key) is damage as well, never an exception
    out of a read.
  * LangGraph's own ``JsonPlusSerializer`` is read by ``_fast_load`` first: its own ext
    hook, but an allowed class taken from ``sys.modules`` instead of ``importlib`` for
    every object (~15% of reading a message list). Whatever that pass does not expect
    (a type not allowed, a failure) abandons it for LangGraph's own read, so what a
    record turns into is exactly what LangGraph would make of it.
It does not know about Redis, keys or envelopes: callers open the envelope first.
"""

from __future__ import annotations

import logging
import sys
import threading
import weakref
from collections.abc import Container, Iterable
from typing import Any

import ormsgpack
from langgraph.checkpoint.serde import _msgpack as lg_msgpack
from langgraph.checkpoint.serde import jsonplus
from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer
from langgraph.checkpoint.serde.event_hooks import SerdeEvent, register_serde_event_listener
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from langgraph_durable.core.errors import RecordDamagedError

logger = logging.getLogger("langgraph_durable")

AllowedTypes = Iterable[tuple[str, ...] | type]

# What JsonPlusSerializer.dumps_typed produces without pickle: a stored type name outside
# these was not written by this saver's serializer ("json" revives LangChain objects by
# name, "pickle" runs code), so it is refused before the serializer sees it.
_JSONPLUS_TYPES = frozenset({"null", "bytes", "bytearray", "msgpack"})
_REFUSALS = ("msgpack_blocked", "msgpack_method_blocked")

_loading = threading.local()  # refusals LangGraph reports during this thread's load()


def _on_serde_event(event: SerdeEvent) -> None:
    refused = getattr(_loading, "refused", None)
    if refused is not None and event.get("kind") in _REFUSALS:
        # str(): a forged record may name a module that is no string (LangGraph reports
        # it as given); a failing listener would let the refusal pass unrecorded.
        parts = (event.get("module"), event.get("name"), event.get("method"))
        refused.append(".".join(str(p) for p in parts if p is not None))


register_serde_event_listener(_on_serde_event)


def _graphs_declare_their_types() -> None:
    """LangGraph computes a compiled graph's allowlist (the types of its state, input,
    output and context schemas) and hands it to the checkpointer through
    ``with_allowlist`` only when LANGGRAPH_STRICT_MSGPACK is on. This saver is strict
    either way, so it has LangGraph always do that; a serializer that allows every type
    ignores the allowlist, so other savers are unaffected."""
    try:
        from langgraph._internal import _serde as graph_allowlists
    except ImportError:  # pragma: no cover - a LangGraph without graph allowlists
        logger.warning(
            "langgraph-durable: this LangGraph does not declare graph types to "
            "checkpointers: pass your state's types with allowed_types="
        )
        return
    graph_allowlists.STRICT_MSGPACK_ENABLED = True


_graphs_declare_their_types()


def default_serde(allowed_types: AllowedTypes = ()) -> JsonPlusSerializer:
    """LangGraph's serializer, strict: its safe types plus ``allowed_types`` only."""
    serde = JsonPlusSerializer(allowed_msgpack_modules=None, allowed_json_modules=None)
    allowed = tuple(allowed_types)
    return serde.with_msgpack_allowlist(allowed) if allowed else serde


class DataOnlySerializer:
    """A serializer for rows another checkpointer stored (a migration source): they are
    data, never code. Writes as LangGraph's strict serializer; reads through ``load``, so
    a row naming a type outside LangGraph's safe types and ``allowed_types`` (``os.system``,
    a ``pickle`` or ``json`` row) raises ``RecordDamagedError`` instead of being built:
    the migrating process holds the Redis credentials and the signing key."""

    def __init__(self, allowed_types: AllowedTypes = ()) -> None:
        self.inner = default_serde(allowed_types)
        self._accepted = accepted_types(self.inner)

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        return self.inner.dumps_typed(obj)

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        type_, raw = data
        return load(self.inner, type_, raw, self._accepted)


def warn_if_permissive(serde: SerializerProtocol, *, signed: bool) -> None:
    """A user-supplied serializer that constructs any type a record names is the user's
    choice; say once what it means when nothing authenticates the records."""
    inner = getattr(serde, "serde", serde)  # EncryptedSerializer wraps one
    if signed or inner is not serde or not isinstance(inner, JsonPlusSerializer):
        return
    if inner._allowed_msgpack_modules is True or inner.pickle_fallback:
        logger.warning(
            "langgraph-durable: this serializer constructs any type a stored record names "
            "(allowed_msgpack_modules=True or pickle_fallback): anyone who can write to your "
            "Redis can make readers run code. Use the default serializer (add your types "
            "with allowed_types=) or set signing_key."
        )


class _Encrypted(Container[str]):
    """The types an ``EncryptedSerializer`` over LangGraph's serializer may be handed:
    ours, encrypted ("msgpack+aes") or plain (it passes a plain one to the serializer
    inside, so a forged plain "json" record would reach LangChain's reviver)."""

    def __init__(self, plain: frozenset[str]) -> None:
        self.plain = plain

    def __contains__(self, type_: object) -> bool:
        return isinstance(type_, str) and type_.partition("+")[0] in self.plain


def accepted_types(serde: SerializerProtocol) -> Container[str] | None:
    """The stored type names ``serde`` may be handed, or None for any (not ours to say)."""
    if isinstance(serde, JsonPlusSerializer) and not serde.pickle_fallback:
        return _JSONPLUS_TYPES
    inner = getattr(serde, "serde", None)
    if (
        isinstance(serde, EncryptedSerializer)
        and isinstance(inner, JsonPlusSerializer)
        and not inner.pickle_fallback
    ):
        return _Encrypted(_JSONPLUS_TYPES)
    return None


def load(serde: SerializerProtocol, type_: Any, data: Any, accepted: Container[str] | None) -> Any:
    """Deserialize a verified record's value, or raise ``RecordDamagedError``."""
    if not isinstance(type_, str) or (accepted is not None and type_ not in accepted):
        raise RecordDamagedError(f"refused serialization type {str(type_)[:40]!r}")
    if isinstance(data, memoryview):
        data = bytes(data)
    outer = getattr(_loading, "refused", None)  # a constructor may read a record itself
    _loading.refused = refused = []
    try:
        value = _fast_load(serde, data) if type_ == "msgpack" else _NOT_FAST
        if value is _NOT_FAST:
            value = serde.loads_typed((type_, data))
    except Exception as exc:  # whatever the serializer raises, the record is unusable
        raise RecordDamagedError(f"undeserializable ({type(exc).__name__})") from exc
    finally:
        _loading.refused = outer
    if refused:
        raise RecordDamagedError(f"refused type {refused[0]} (not in the msgpack allowlist)")
    return value


_NOT_FAST = object()
_unpackb, _NON_STR_KEYS = ormsgpack.unpackb, ormsgpack.OPT_NON_STR_KEYS
_CONSTRUCTED = (jsonplus.EXT_CONSTRUCTOR_KW_ARGS, jsonplus.EXT_PYDANTIC_V2)  # cls(**kwargs)
_LANGGRAPH_HOOK = getattr(getattr(jsonplus, "_msgpack_ext_hook", None), "__code__", None)


def _fast_load(serde: SerializerProtocol, data: bytes) -> Any:
    """``serde.loads_typed(("msgpack", data))`` for LangGraph's own serializer and ext
    hook, ~15% faster: an object LangGraph builds as ``cls(**kwargs)`` whose type its
    allowlist accepts takes its class from ``sys.modules`` instead of
    ``importlib.import_module`` (which LangGraph calls for every message). Anything else
    the fast pass meets (a type not allowed or not imported yet, a payload of another
    shape, a constructor that fails) abandons it, and LangGraph reads the record from
    the start: the result, refusals and fallbacks are LangGraph's, and a hostile record
    costs at most two reads. ``_NOT_FAST`` where it does not apply."""
    if type(serde).loads_typed is not JsonPlusSerializer.loads_typed:
        return _NOT_FAST
    base = getattr(serde, "_unpack_ext_hook", None)
    try:
        allowed = _allowlists[base]
    except (KeyError, TypeError):  # a hook not seen yet, or one that is no function
        allowed = _allowlist_of(base)
        if allowed is not None:
            _allowlists[base] = allowed
    if allowed is None:
        return _NOT_FAST

    def hook(code: int, payload: bytes) -> Any:
        if code not in _CONSTRUCTED:
            return base(code, payload)  # type: ignore[misc]
        module, name, kwargs = _unpackb(payload, ext_hook=hooks[0], option=_NON_STR_KEYS)[:3]
        key = (module, name)
        if key not in lg_msgpack.SAFE_MSGPACK_TYPES and not (allowed and key in allowed):
            raise LookupError("not for the fast pass")
        return getattr(sys.modules[module], name)(**kwargs)  # as LangGraph: looked up

    # The hook reaches itself (for nested objects) through this list, emptied at the end:
    # a closure naming itself is a cycle, which left each read to the garbage collector
    # (a collection every few reads of a long message list).
    hooks = [hook]
    try:
        return ormsgpack.unpackb(data, ext_hook=hook, option=ormsgpack.OPT_NON_STR_KEYS)
    except Exception:  # noqa: BLE001 - abandoned: LangGraph reads it from the start
        return _NOT_FAST
    finally:
        hooks.clear()


# LangGraph's hook -> the allowlist it checks (the very set its closure holds, so a change
# in place shows). The value does not lead back to the hook: an entry goes with it.
_allowlists: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()


def _allowlist_of(base: Any) -> Any:
    """The explicit allowlist (a set, or () for none) LangGraph's ext hook ``base``
    checks, read from the hook itself (what it enforces, even if the serializer's
    attribute changed since); None if ``base`` is not LangGraph's own hook. Types its
    permissive mode merely warns about are never in it."""
    if _LANGGRAPH_HOOK is None or getattr(base, "__code__", None) is not _LANGGRAPH_HOOK:
        return None
    try:
        cells = dict(zip(base.__code__.co_freevars, base.__closure__))
        check = cells["_check_allowed"].cell_contents
        allowed = dict(zip(check.__code__.co_freevars, check.__closure__))["allowed_modules"]
        modules = allowed.cell_contents
    except (AttributeError, KeyError, TypeError, ValueError):
        return None
    return modules if isinstance(modules, set) else ()
