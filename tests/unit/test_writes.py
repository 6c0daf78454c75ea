"""Writes, fencing and the reply-code table, driven by hand."""

from __future__ import annotations

from typing import Any

import pytest
from langgraph.checkpoint.base import empty_checkpoint
from redis.exceptions import ResponseError

from langgraph_durable.core import fencing
from langgraph_durable.core.errors import (
    CheckpointLostError,
    LeaseHeldError,
    LeaseLostError,
    NotReplicatedError,
)
from langgraph_durable.core.fencing import Lease
from langgraph_durable.core.layouts import COMPACT, compact_keys
from langgraph_durable.core.ops import Batch, Script
from tests.unit.scripted import PREFIX, THREAD, config, drive, make_core


def put_plan(core: Any, parent: str | None = None) -> Any:
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = {"a": 1, "b": 2}
    checkpoint["channel_versions"] = {"a": "1.0", "b": "1.0"}
    return core.put(config(parent), checkpoint, {"step": 1}, {"a": "1.0", "b": "1.0"})


def test_put_is_one_round_trip_whole_or_not_at_all() -> None:
    core = make_core(ttl=60)
    stored, (batch,) = drive(put_plan(core), ("batch:put_checkpoint", [1]))
    assert batch.atomic, "with a ttl, MULTI: a value hash never lacks its expiry"
    script = batch.commands[-1]
    assert script.args[0] == 60 and script.args[1] == ""  # ttl, no lease held
    assert stored["configurable"]["thread_id"] == THREAD
    # a ttl is set on every key of the thread: the full layout, not the compact one
    tk = core.keys.thread(THREAD)
    assert (script.keys, script.layout) == (tk.for_writes(), "")
    writes = core.put_writes(config("c1"), [("a", 1)], "task")
    _, (batch,) = drive(writes, ("batch:put_writes", [1]))
    assert (batch.commands[-1].keys, batch.commands[-1].layout) == (tk.for_writes(), "")
    _, (batch,) = drive(
        make_core().put_writes(config("c1"), [("a", 1)], "task"), ("batch:put_writes", [1])
    )
    assert (batch.commands[-1].keys, batch.commands[-1].layout) == (
        compact_keys(tk, "put_writes"),
        COMPACT,
    )


def test_small_values_go_inside_the_script_call_and_big_ones_ahead_of_it() -> None:
    """A value sent ahead costs the script a check that it is there (HEXISTS) and Redis a
    command of its own: only those too big to pass through Lua cheaply go ahead."""
    core = make_core()
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = {"a": 1, "big": "x" * 4000}
    checkpoint["channel_versions"] = {"a": "1.0", "big": "1.0"}
    plan = core.put(config(None), checkpoint, {"step": 1}, {"a": "1.0", "big": "1.0"})
    _, (batch,) = drive(plan, ("batch:HSETNX,put_checkpoint", [1, 1]))
    (_, bl, big_field, big_record), script = batch.commands
    assert bl == core.keys.thread(THREAD).bl and len(big_record) > 2048
    at = script.args.index("sent")
    elements = script.args[at - 1]  # E, then "sent", then the E digests (none here)
    ahead, field, within, small_field, small_record = script.args[at + 1 : at + 6]
    assert (elements, ahead, field, within) == (0, 1, big_field, 0)
    assert 0 < len(small_record) <= 2048
    assert small_field == core.keys.blob_field("", "a", "1.0")


def test_writes_in_a_lease_carry_its_token() -> None:
    core = make_core()
    binding = fencing.bind(PREFIX, THREAD, "42")
    try:
        _, (batch,) = drive(put_plan(core), ("batch:put_checkpoint", [1]))
    finally:
        fencing.unbind(binding)
    assert batch.commands[-1].args[1] == "42"
    assert fencing.held_token(PREFIX, THREAD) == ""


@pytest.mark.parametrize(
    ("refusal", "error", "fields"),
    [
        ("LGD_LEASED host:1:ab 1500", LeaseHeldError, {"holder": "host:1:ab", "expires_in": 1.5}),
        ("LGD_FENCED 5 7", LeaseLostError, {"token": "5", "newest": "7"}),
        ("LGD_FENCED 5 none", LeaseLostError, {"newest": None}),
        ("LGD_LOST", CheckpointLostError, {"missing": "the checkpoint's record is not there"}),
    ],
)
def test_a_refused_write_raises_the_typed_error_of_its_code(
    refusal: str, error: type[Exception], fields: dict[str, Any]
) -> None:
    core = make_core()
    with pytest.raises(error) as raised:
        drive(
            put_plan(core, parent="p1"),
            ("batch:put_checkpoint", [ResponseError(refusal)]),
        )
    for name, value in fields.items():
        assert getattr(raised.value, name) == value
    assert raised.value.thread_id == THREAD


def test_a_key_of_the_wrong_type_is_repaired_and_the_write_sent_again() -> None:
    core = make_core()
    tk = core.keys.thread(THREAD)
    _, ops = drive(
        put_plan(core),
        ("batch:put_checkpoint", [ResponseError("LGD_REPAIR wix")]),
        ("batch:put_checkpoint", [1]),
    )
    first, (again,) = ops[0].commands[-1], ops[1].commands
    assert isinstance(again, Script) and again.args == first.args
    # without a ttl, first with the compact layout's keys; the resend with every key
    assert (first.keys, first.layout) == (compact_keys(tk, "put_checkpoint"), COMPACT)
    assert (again.keys, again.layout) == (tk.with_twins(), "")


def test_put_waits_for_replicas_and_says_when_too_few_acknowledged() -> None:
    core = make_core(wait_for_replicas=2, replica_timeout_ms=50)
    with pytest.raises(NotReplicatedError) as raised:
        drive(put_plan(core), ("batch:put_checkpoint", [1, 1]))
    assert (raised.value.wanted, raised.value.acknowledged) == (2, 1)
    # WAIT rides in the write's own round trip: it counts its connection's writes only
    _, (batch,) = drive(put_plan(core), ("batch:put_checkpoint", [1, 2]))
    assert batch.wait_replicas == (2, 50)


def test_put_writes_sends_every_write_in_one_script_call() -> None:
    core = make_core()
    plan = core.put_writes(config("c1"), [("a", 1), ("__error__", "e")], "task", "~0")
    _, (batch,) = drive(plan, ("batch:put_writes", [1]))
    (script,) = batch.commands
    assert script.args[2] == 0  # no elements: neither value is a list (elements.py)
    members, specials = script.args[3::3], script.args[5::3]
    assert len(members) == 2 and specials == ["0", "1"]  # a special channel overwrites


def test_lease_plans_hand_out_tokens_and_name_the_holder() -> None:
    core = make_core()
    lease = Lease(THREAD, "me", ttl=3.0)
    token, (op,) = drive(core.acquire_lease(lease), ("lease", [1, b"9"]))
    assert token == "9" and op.args[:3] == ["acquire", "me", 3000]
    with pytest.raises(LeaseHeldError) as raised:
        drive(core.acquire_lease(lease), ("lease", [0, b"other:1:x", 2500]))
    assert raised.value.holder == "other:1:x" and raised.value.expires_in == 2.5
    lease.token = "9"
    renewed, (op,) = drive(core.renew_lease(lease), ("lease", 0))
    assert renewed is False and op.args[3] == "9"


def test_an_op_of_a_batch_is_counted_once() -> None:
    """Round trips are what a plan yields: a batch is one, whatever it holds."""
    _, ops = drive(put_plan(make_core()), ("batch:put_checkpoint", [1]))
    assert len(ops) == 1 and isinstance(ops[0], Batch) and ops[0].wait_replicas is None
