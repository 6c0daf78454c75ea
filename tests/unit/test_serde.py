"""The fast read of LangGraph's serializer (``serde._fast_load``) reads every record
exactly as LangGraph's own does: same values, same refusals, same fallbacks, and a
hostile record costs at most two reads. No server."""

from __future__ import annotations

import datetime
import gc
import importlib
import uuid
import weakref
from dataclasses import dataclass
from typing import Any

import ormsgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langgraph.checkpoint.serde import jsonplus
from langgraph.types import Send
from pydantic import BaseModel

from langgraph_durable.core import serde as durable_serde
from langgraph_durable.core.errors import RecordDamagedError
from langgraph_durable.core.serde import accepted_types, default_serde, load

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


@dataclass
class Invoice:
    number: int
    amount: float


class Address(BaseModel):
    street: str
    zip_code: str
    floor: float = 0.0  # an int given is coerced by the constructor, not by model_construct


def read(serde: Any, data: bytes, *, shortcut: bool = True) -> Any:
    """What ``load`` makes of ``data`` (the error's text if it refuses it), with the
    class-caching hook or through LangGraph's ``loads_typed`` alone."""
    saved = durable_serde._fast_load
    if not shortcut:
        durable_serde._fast_load = lambda serde, data: durable_serde._NOT_FAST
    try:
        return load(serde, "msgpack", data, accepted_types(serde))
    except RecordDamagedError as exc:
        return f"damaged: {exc}"
    finally:
        durable_serde._fast_load = saved


def same(ours: Any, theirs: Any) -> bool:
    """Equal, and made of the same types all the way down."""
    return ours == theirs and [type(v) for v in _walk(ours)] == [type(v) for v in _walk(theirs)]


VALUES = [
    [
        HumanMessage(content="hi", id="1"),
        AIMessage(
            content="",
            id="2",
            tool_calls=[{"name": "charge", "args": {"amount": 5}, "id": "c1"}],
        ),
        ToolMessage(content="ok", tool_call_id="c1", id="3"),
        SystemMessage(content="be brief"),
    ],
    {"nested": {"when": datetime.datetime(2026, 11, 24, 12, 0), "id": uuid.UUID(int=7)}},
    Send("node", {"x": 1}),
    [Invoice(1, 2.5), Address(street="Main", zip_code="1", floor=2)],
]


@pytest.mark.parametrize("value", VALUES)
@pytest.mark.parametrize("allowlist", [(), (Invoice, Address)])
def test_every_value_reads_as_langgraph_reads_it(value: Any, allowlist: tuple[type, ...]) -> None:
    serde = default_serde(allowlist)
    _, data = serde.dumps_typed(value)
    ours, theirs = read(serde, data), read(serde, data, shortcut=False)
    assert same(ours, theirs)
    if allowlist or not (isinstance(value, list) and isinstance(value[0], Invoice)):
        assert same(ours, value)
    else:  # types outside the allowlist are refused, by both
        assert (
            ours
            == "damaged: refused type tests.unit.test_serde.Invoice (not in the msgpack allowlist)"
        )


def _walk(value: Any) -> list[Any]:
    if isinstance(value, dict):
        return [value, *(x for v in value.values() for x in _walk(v))]
    if isinstance(value, list):
        return [value, *(x for v in value for x in _walk(v))]
    return [value]


def test_a_list_of_messages_imports_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    serde = default_serde()
    _, data = serde.dumps_typed([HumanMessage(content=str(i)) for i in range(50)])
    load(serde, "msgpack", data, accepted_types(serde))  # the class is cached from here on
    imports: list[str] = []
    real = importlib.import_module
    monkeypatch.setattr(importlib, "import_module", lambda n, *a: imports.append(n) or real(n, *a))
    assert len(load(serde, "msgpack", data, accepted_types(serde))) == 50
    assert imports == []


@pytest.mark.parametrize("value", [[HumanMessage(content="x")], {"n": 1}])
def test_a_read_leaves_nothing_for_the_garbage_collector(value: Any) -> None:
    """Each read frees what it made as it ends: a cycle left per read (the hook naming
    itself) made a collection run every few reads of a long message list."""
    serde = default_serde(())
    data = serde.dumps_typed(value)[1]
    load(serde, "msgpack", data, accepted_types(serde))  # warmed: the allowlist is cached
    gc.collect()
    gc.disable()
    try:
        gc.set_debug(gc.DEBUG_SAVEALL)
        load(serde, "msgpack", data, accepted_types(serde))
        gc.collect()
        # what another thread of the test process left may be there too: only ours counts
        left = [o for o in gc.garbage if "_fast_load" in getattr(o, "__qualname__", "")]
        assert left == []
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()


def test_a_serializer_that_reads_its_own_way_is_left_to_itself() -> None:
    class Shouting(jsonplus.JsonPlusSerializer):
        def loads_typed(self, data: tuple[str, bytes]) -> Any:
            return "LOUD"

    custom = jsonplus.JsonPlusSerializer(__unpack_ext_hook__=lambda code, data: "hooked")
    data = ormsgpack.packb(1)
    assert durable_serde._fast_load(Shouting(), data) is durable_serde._NOT_FAST
    assert durable_serde._fast_load(custom, data) is durable_serde._NOT_FAST
    assert load(Shouting(), "msgpack", ormsgpack.packb(1), None) == "LOUD"


NAMES = st.sampled_from(
    [
        ("langchain_core.messages.human", "HumanMessage"),
        ("langchain_core.messages.ai", "AIMessage"),
        ("tests.unit.test_serde", "Invoice"),
        ("tests.unit.test_serde", "Address"),
        ("os", "system"),
        ("builtins", "eval"),
        ("no.such.module", "Thing"),
        ("langchain_core.messages.human", "NoSuchName"),
    ]
)
KWARGS = st.dictionaries(
    st.sampled_from(["content", "id", "number", "amount", "street", "zip_code", "floor", "bogus"]),
    st.one_of(
        st.text(max_size=5),
        st.integers(min_value=-(2**63), max_value=2**63 - 1),
        st.floats(allow_nan=False),
        st.none(),
    ),
    max_size=4,
)


@st.composite
def ext_payloads(draw: Any) -> bytes:
    """A msgpack extension as a record could hold it: a well-formed (module, name,
    kwargs[, method]) of any code, or arbitrary bytes."""
    code = draw(st.sampled_from([0, 1, 2, 3, 4, 5, 6, 7, 42]))
    if draw(st.booleans()):
        module, name = draw(NAMES)
        parts: list[Any] = [module, name, draw(KWARGS)]
        if draw(st.booleans()):
            parts.append("model_validate")
        inner = ormsgpack.packb(parts[: draw(st.integers(min_value=1, max_value=len(parts)))])
    else:
        inner = draw(st.binary(max_size=24))
    return ormsgpack.packb([ormsgpack.Ext(code, inner)])


@settings(max_examples=300, deadline=None)
@given(payload=ext_payloads(), allow=st.booleans())
def test_any_extension_reads_as_langgraph_reads_it(payload: bytes, allow: bool) -> None:
    serde = default_serde((Invoice, Address) if allow else ())
    assert same(read(serde, payload), read(serde, payload, shortcut=False))


def test_an_object_is_built_by_its_constructor_as_langgraph_builds_it() -> None:
    """Validation and coercion happen as in LangGraph's hook (``cls(**kwargs)``)."""
    serde = default_serde((Address,))
    kwargs = {"street": "Main", "zip_code": "1", "floor": 3}
    inner = ormsgpack.packb(["tests.unit.test_serde", "Address", kwargs, "model_validate_json"])
    payload = ormsgpack.packb(ormsgpack.Ext(jsonplus.EXT_PYDANTIC_V2, inner))
    ours = read(serde, payload)
    assert same(ours, read(serde, payload, shortcut=False))
    assert type(ours.floor) is float


def test_a_serializer_and_its_hook_are_collected_together() -> None:
    """Graphs compiled per request each get a serializer: none may be kept alive."""
    serde = default_serde((Invoice,))
    assert same(read(serde, serde.dumps_typed([Invoice(1, 2.0)])[1]), [Invoice(1, 2.0)])
    gone, hook_gone = weakref.ref(serde), weakref.ref(serde._unpack_ext_hook)
    del serde
    gc.collect()
    assert gone() is None and hook_gone() is None


def chain(depth: int, module: str, name: str) -> bytes:
    """``depth`` objects of (module, name), each the only keyword argument of the next."""
    inner = ormsgpack.packb(["langchain_core.messages.human", "HumanMessage", {"content": "x"}])
    payload = ormsgpack.Ext(jsonplus.EXT_CONSTRUCTOR_KW_ARGS, inner)
    for _ in range(depth):
        inner = ormsgpack.packb([module, name, {"content": payload}])
        payload = ormsgpack.Ext(jsonplus.EXT_CONSTRUCTOR_KW_ARGS, inner)
    return ormsgpack.packb(payload)


@pytest.mark.parametrize(
    "module, name",
    [("os", "system"), ("langchain_core.messages.human", "HumanMessage")],  # refused; fails
)
def test_a_deep_hostile_record_costs_at_most_two_reads(
    monkeypatch: pytest.MonkeyPatch, module: str, name: str
) -> None:
    """Nested objects refused or failing their constructor (HumanMessage(content=<a
    message>)) at every level: the fast read gives up once, LangGraph reads once."""
    serde, data = default_serde(), chain(60, module, name)
    unpacks = []
    real = ormsgpack.unpackb
    monkeypatch.setattr(ormsgpack, "unpackb", lambda *a, **k: unpacks.append(1) or real(*a, **k))
    theirs = read(serde, data, shortcut=False)
    langgraph_alone, unpacks[:] = len(unpacks), []
    assert same(read(serde, data), theirs)
    assert len(unpacks) <= 2 * langgraph_alone


def test_what_the_hook_enforces_is_what_the_fast_read_enforces() -> None:
    """The allowlist is LangGraph's hook's own, checked on every object: shrunk in place,
    the attribute reassigned, or the hook replaced, the fast read follows the hook."""
    serde = default_serde((Invoice,))
    data = serde.dumps_typed([Invoice(1, 2.0)])[1]
    assert same(read(serde, data), [Invoice(1, 2.0)])
    serde._allowed_msgpack_modules = {("os", "getcwd")}  # the hook still allows Invoice
    assert same(read(serde, data), read(serde, data, shortcut=False))
    serde._allowed_msgpack_modules.clear()
    assert durable_serde._allowlist_of(serde._unpack_ext_hook) == {(__name__, "Invoice")}
    durable_serde._allowlist_of(serde._unpack_ext_hook).clear()  # shrunk in place
    assert "refused type" in read(serde, data)
    serde._unpack_ext_hook = lambda code, payload: "DENIED"
    assert read(serde, data) == read(serde, data, shortcut=False) == ["DENIED"]


def test_a_class_replaced_in_its_module_is_the_one_built(monkeypatch: pytest.MonkeyPatch) -> None:
    class Patched(HumanMessage):
        pass

    serde = default_serde()
    data = serde.dumps_typed([HumanMessage(content="hi")])[1]
    monkeypatch.setattr("langchain_core.messages.human.HumanMessage", Patched)
    assert type(read(serde, data)[0]) is Patched is type(read(serde, data, shortcut=False)[0])


class Reader(BaseModel):
    """A type whose constructor reads a record itself (``load`` re-entered)."""

    x: int

    def model_post_init(self, _: Any) -> None:
        serde = default_serde()
        READS.append(load(serde, "msgpack", ormsgpack.packb(1), accepted_types(serde)))


READS: list[Any] = []


def test_a_constructor_that_reads_a_record_itself_keeps_the_outer_refusal() -> None:
    serde = default_serde((Reader,))
    reader = ormsgpack.packb(
        ormsgpack.Ext(jsonplus.EXT_PYDANTIC_V2, ormsgpack.packb([__name__, "Reader", {"x": 1}]))
    )
    refused = ormsgpack.packb(ormsgpack.Ext(0, ormsgpack.packb(["os", "getcwd", None])))
    data = b"\x92" + reader + refused  # [Reader(x=1), os.getcwd(None)]
    READS.clear()
    for shortcut in (True, False):
        assert read(serde, data, shortcut=shortcut).startswith("damaged: refused type os.getcwd")
    assert READS == [1, 1]  # the inner read ran, each time
