"""The class-caching ext hook (``serde._class_hook``) reads every record exactly as
LangGraph's own serializer does: same values, same refusals, same fallbacks. No server."""

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

from langgraph_durable import serde as durable_serde
from langgraph_durable.errors import RecordDamagedError
from langgraph_durable.serde import accepted_types, default_serde, load

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
    saved = durable_serde._class_hook
    if not shortcut:
        durable_serde._class_hook = lambda serde: None  # type: ignore[assignment]
    try:
        return load(serde, "msgpack", data, accepted_types(serde))
    except RecordDamagedError as exc:
        return f"damaged: {exc}"
    finally:
        durable_serde._class_hook = saved


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
    assert durable_serde._class_hook(serde) is not None
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


def test_a_list_of_messages_resolves_each_class_once(monkeypatch: pytest.MonkeyPatch) -> None:
    serde = default_serde()
    _, data = serde.dumps_typed([HumanMessage(content=str(i)) for i in range(50)])
    load(serde, "msgpack", data, accepted_types(serde))  # the class is cached from here on
    imports: list[str] = []
    real = importlib.import_module
    monkeypatch.setattr(importlib, "import_module", lambda n, *a: imports.append(n) or real(n, *a))
    assert len(load(serde, "msgpack", data, accepted_types(serde))) == 50
    assert imports == []


def test_a_serializer_that_reads_its_own_way_is_left_to_itself() -> None:
    class Shouting(jsonplus.JsonPlusSerializer):
        def loads_typed(self, data: tuple[str, bytes]) -> Any:
            return "LOUD"

    custom = jsonplus.JsonPlusSerializer(__unpack_ext_hook__=lambda code, data: "hooked")
    assert durable_serde._class_hook(Shouting()) is None
    assert durable_serde._class_hook(custom) is None
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
    assert durable_serde._class_hook(serde) is not None
    gone, hook_gone = weakref.ref(serde), weakref.ref(serde._unpack_ext_hook)
    del serde
    gc.collect()
    assert gone() is None and hook_gone() is None
