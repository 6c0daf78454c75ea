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
  * LangGraph's own ``JsonPlusSerializer`` is read through ``_class_hook``: the same
    ext hook, with the class of each allowed (module, name) resolved once instead of
    through ``importlib`` for every object (~15% of reading a message list). Anything
    else (a type not allowed, a failure, any other extension) goes to LangGraph's hook
    unchanged, so what a record turns into is exactly what LangGraph would make of it.
It does not know about Redis, keys or envelopes: callers open the envelope first.
"""

from __future__ import annotations

import importlib
import logging
import threading
import weakref
from collections.abc import Callable, Iterable
from typing import Any

import ormsgpack
from langgraph.checkpoint.serde import _msgpack as lg_msgpack
from langgraph.checkpoint.serde import jsonplus
from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.serde.event_hooks import SerdeEvent, register_serde_event_listener
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from langgraph_durable.errors import RecordDamagedError

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


def accepted_types(serde: SerializerProtocol) -> frozenset[str] | None:
    """The stored type names ``serde`` may be handed, or None for any (not ours to say)."""
    if isinstance(serde, JsonPlusSerializer) and not serde.pickle_fallback:
        return _JSONPLUS_TYPES
    return None


def load(serde: SerializerProtocol, type_: Any, data: Any, accepted: frozenset[str] | None) -> Any:
    """Deserialize a verified record's value, or raise ``RecordDamagedError``."""
    if not isinstance(type_, str) or (accepted is not None and type_ not in accepted):
        raise RecordDamagedError(f"refused serialization type {str(type_)[:40]!r}")
    if isinstance(data, memoryview):
        data = bytes(data)
    _loading.refused = refused = []
    try:
        hook = _class_hook(serde) if type_ == "msgpack" else None
        if hook is not None:
            value = ormsgpack.unpackb(data, ext_hook=hook, option=ormsgpack.OPT_NON_STR_KEYS)
        else:
            value = serde.loads_typed((type_, data))
    except Exception as exc:  # whatever the serializer raises, the record is unusable
        raise RecordDamagedError(f"undeserializable ({type(exc).__name__})") from exc
    finally:
        _loading.refused = None
    if refused:
        raise RecordDamagedError(f"refused type {refused[0]} (not in the msgpack allowlist)")
    return value


ExtHook = Callable[[int, bytes], Any]
_CONSTRUCTED = (jsonplus.EXT_CONSTRUCTOR_KW_ARGS, jsonplus.EXT_PYDANTIC_V2)  # cls(**kwargs)
# serializer -> (its ext hook, our hook in front of it). Neither value references the
# serializer, so an entry goes with it (a graph compiled per request makes one each time).
_class_hooks: weakref.WeakKeyDictionary[Any, tuple[ExtHook, ExtHook]] = weakref.WeakKeyDictionary()


def _class_hook(serde: SerializerProtocol) -> ExtHook | None:
    """The fast ext hook standing in for ``serde``'s own, or None where ``serde`` is not
    LangGraph's ``JsonPlusSerializer`` reading msgpack its own way (a subclass that
    reads differently, a custom ext hook): those are read by ``loads_typed``."""
    if type(serde).loads_typed is not JsonPlusSerializer.loads_typed or getattr(
        serde, "_custom_unpack_ext_hook", True
    ):
        return None
    base = getattr(serde, "_unpack_ext_hook", None)
    if base is None:
        return None
    known = _class_hooks.get(serde)
    if known is None or known[0] is not base:
        allowed = getattr(serde, "_allowed_msgpack_modules", None)
        known = (base, _make_class_hook(base, allowed if isinstance(allowed, set) else set()))
        _class_hooks[serde] = known
    return known[1]


def _make_class_hook(base: ExtHook, allowed: set[tuple[str, ...]]) -> ExtHook:
    """LangGraph's hook ``base`` with one shortcut: an object built as ``cls(**kwargs)``
    whose (module, name) LangGraph's allowlist accepts (its safe types, or ``allowed``:
    never the types its permissive mode merely warns about) takes its class from a
    cache. A type not allowed, an unexpected payload or a constructor that fails goes to
    ``base`` (which refuses, reports or falls back exactly as it always does)."""
    classes: dict[tuple[str, str], Any] = {}

    def hook(code: int, data: bytes) -> Any:
        if code not in _CONSTRUCTED:
            return base(code, data)
        try:
            module, name, kwargs = ormsgpack.unpackb(
                data, ext_hook=hook, option=ormsgpack.OPT_NON_STR_KEYS
            )[:3]
            cls = classes.get((module, name))
            if cls is None:
                key = (module, name)
                if key not in lg_msgpack.SAFE_MSGPACK_TYPES and key not in allowed:
                    return base(code, data)
                cls = classes[key] = getattr(importlib.import_module(module), name)
            return cls(**kwargs)
        except Exception:  # noqa: BLE001 - LangGraph's hook decides what a failure gives
            return base(code, data)

    return hook
