"""The listing's plans (``core/overview.py``) over scripted replies: one round trip each;
a key of the wrong type reads as "damaged", a lease as its owner."""

from __future__ import annotations

from redis.exceptions import ResponseError

from langgraph_durable.core.keys import KeySchema
from langgraph_durable.core.overview import ThreadOverview, thread_exists, thread_overview
from tests.unit.scripted import drive

KEYS = KeySchema("unit")


def test_a_thread_exists_if_any_of_its_keys_does() -> None:
    found, ops = drive(thread_exists(KEYS, "t"), ("EXISTS", 1))
    assert found is True and len(ops) == 1
    tk = KEYS.thread("t")
    assert set(ops[0].args[1:]) == {*tk.all(), *tk.damaged()}
    assert drive(thread_exists(KEYS, "t"), ("EXISTS", 0))[0] is False


def test_counts_and_the_lease_holder_in_one_round_trip() -> None:
    seen, ops = drive(thread_overview(KEYS, "t"), ("batch:ZCARD,ZCARD,GET", [5, 2, b"w1\0tok"]))
    assert seen == ThreadOverview(5, 2, "w1") and len(ops) == 1


def test_keys_of_the_wrong_type_read_as_damaged() -> None:
    wrong = ResponseError("WRONGTYPE Operation against a key holding the wrong kind of value")
    seen, _ = drive(thread_overview(KEYS, "t"), ("batch:ZCARD,ZCARD,GET", [wrong, 0, wrong]))
    assert seen == ThreadOverview("damaged", 0, "damaged")
    assert (
        drive(thread_overview(KEYS, "t"), ("batch:ZCARD,ZCARD,GET", [0, 0, None]))[0].leased_to
        is None
    )
