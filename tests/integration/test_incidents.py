"""Acknowledging a thread's quarantine (core/incidents.py) on a real Redis: the record of
the decision is verified before it is shown, expires, is copied and deleted with the
thread; a reason is required and an empty quarantine has nothing to acknowledge."""

from __future__ import annotations

from typing import Any

import pytest
import redis

from langgraph_durable import InvalidConfigError, RedisSaver
from langgraph_durable.core import incidents
from tests.helpers.graphs import counter_graph
from tests.helpers.redis_keys import flip_last_bit


@pytest.fixture
def damaged(redis_client: Any, key_prefix: str) -> tuple[RedisSaver, Any]:
    saver = RedisSaver(redis_client, key_prefix=key_prefix, ttl=3600)
    graph = counter_graph().compile(checkpointer=saver)
    config = {"configurable": {"thread_id": "t"}}
    graph.invoke({"value": 1, "trail": []}, config)
    tk = saver.keys.thread("t")
    flip_last_bit(redis_client, tk.cp, max(redis_client.hkeys(tk.cp)))
    saver.get_tuple(config)  # quarantines it
    assert redis_client.hlen(tk.qt) == 1
    return saver, tk


def test_an_acknowledgement_needs_a_reason_and_something_quarantined(damaged: Any) -> None:
    saver, _ = damaged
    with pytest.raises(InvalidConfigError, match="reason"):
        saver.acknowledge_quarantine("t", reason="  ")
    saver.acknowledge_quarantine("t", reason="looked", by="ann")
    with pytest.raises(InvalidConfigError, match="nothing of thread"):
        saver.acknowledge_quarantine("t", reason="again")
    assert saver.verify("t").ok


def test_the_record_expires_copies_and_goes_with_its_thread(
    damaged: Any, redis_client: redis.Redis
) -> None:
    saver, tk = damaged
    done = saver.acknowledge_quarantine("t", reason="looked", by="ann")
    assert 0 < redis_client.ttl(tk.lg) <= 3600
    saver.copy_thread("t", "t2")
    (copied,) = saver.drive(incidents.acknowledgements(saver.core, "t2"))
    assert (copied.by, copied.reason, copied.records) == ("ann", "looked", done.records)
    saver.delete_thread("t")
    assert saver.drive(incidents.acknowledgements(saver.core, "t")) == []


def test_a_damaged_or_forged_acknowledgement_is_shown_as_damage(
    damaged: Any, redis_client: redis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    saver, tk = damaged
    saver.acknowledge_quarantine("t", reason="looked", by="ann")
    (field,) = [f for f in redis_client.hkeys(tk.lg) if saver.keys.is_ledger_ack(f)]
    flip_last_bit(redis_client, tk.lg, field)
    (shown,) = saver.drive(incidents.acknowledgements(saver.core, "t"))
    assert shown.damage and shown.by is None and shown.records == ()
    assert "acknowledgement of thread 't' is damaged" in caplog.text
    redis_client.hset(tk.lg, field, b"forged, no envelope")
    (shown,) = saver.drive(incidents.acknowledgements(saver.core, "t"))
    assert shown.damage
