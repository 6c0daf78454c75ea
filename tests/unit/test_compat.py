"""langgraph-checkpoint-redis's arguments, translated: no Redis needed to check them."""

from __future__ import annotations

from typing import Any

import pytest

from langgraph_durable.core import reads
from langgraph_durable.core.errors import ConfigurationError
from langgraph_durable.core.ops import Script
from langgraph_durable.io.compat import key_prefix, ttl_settings
from langgraph_durable.io.connect import SentinelUrl, parse_sentinel_url
from tests.unit.scripted import make_core


@pytest.mark.parametrize(
    "ttl, refresh, expected",
    [
        (None, None, (None, False)),
        (90, None, (90, False)),  # an int is seconds
        (90, True, (90, True)),
        ({"default_ttl": 60}, None, (3600, False)),  # a dict is minutes
        ({"default_ttl": 0.05, "refresh_on_read": True}, None, (3, True)),
        ({"default_ttl": 1.5}, True, (90, True)),
        ({"default_ttl": 1, "refresh_on_read": False}, False, (60, False)),
        ({}, None, (None, False)),
    ],
)
def test_ttl_settings(ttl: Any, refresh: Any, expected: tuple[Any, bool]) -> None:
    assert ttl_settings(ttl, refresh) == expected


@pytest.mark.parametrize(
    "ttl, refresh, named",
    [
        ({"default_ttl": 5, "ttl_minutes": 5}, None, "'ttl_minutes'"),
        ({"default_ttl": -1}, None, "default_ttl"),
        ({"default_ttl": "60"}, None, "default_ttl"),
        ({"default_ttl": 0.001}, None, "under one second"),
        ({"default_ttl": 1, "refresh_on_read": True}, False, "contradicts"),
        ({"refresh_on_read": True}, None, "needs a ttl"),
        (None, True, "needs a ttl"),
        (0, None, "ttl must be"),
        (True, None, "ttl must be"),
        (2.5, None, "ttl must be"),  # seconds are whole: a float is a mistake, not minutes
        (60, "yes", "refresh_on_read must be"),
    ],
)
def test_bad_ttl_settings_name_what_is_wrong(ttl: Any, refresh: Any, named: str) -> None:
    with pytest.raises(ConfigurationError, match=named):
        ttl_settings(ttl, refresh)


def test_checkpoint_prefix_is_the_key_prefix_and_the_write_prefix_has_no_counterpart() -> None:
    assert key_prefix("lgd", None, None, default="lgd") == "lgd"
    assert key_prefix("lgd", "app", None, default="lgd") == "app"
    with pytest.raises(ConfigurationError, match="pass one"):
        key_prefix("mine", "app", None, default="lgd")
    with pytest.raises(ConfigurationError, match="checkpoint_write_prefix"):
        key_prefix("lgd", "app", "app_writes", default="lgd")


@pytest.mark.parametrize(
    "url, expected",
    [
        (
            "redis+sentinel://s1:26380,s2/mymaster/2",
            SentinelUrl([("s1", 26380), ("s2", 26379)], "mymaster", 2, None, None),
        ),
        (
            "redis+sentinel://:p%40ss@10.0.0.1:5000/orders",
            SentinelUrl([("10.0.0.1", 5000)], "orders", None, None, "p@ss"),
        ),
        (
            "redis+sentinel://worker:secret@[::1]:26379,[fe80::2]/svc/0",
            SentinelUrl([("::1", 26379), ("fe80::2", 26379)], "svc", 0, "worker", "secret"),
        ),
        ("redis+sentinel://host", SentinelUrl([("host", 26379)], "mymaster", None, None, None)),
    ],
)
def test_sentinel_urls(url: str, expected: SentinelUrl) -> None:
    assert parse_sentinel_url(url) == expected


@pytest.mark.parametrize(
    "url, named",
    [
        ("redis+sentinel://h:port/svc", "bad sentinel address 'h:port'"),
        ("redis+sentinel://h:1/svc/db", "/service_name/db"),
        ("redis+sentinel://h:1/svc/0/extra", "/service_name/db"),
        ("redis+sentinel://h:1/svc?socket_timeout=1", "no query options"),
        ("redis+sentinel://,h:1/svc", "bad sentinel address ''"),
    ],
)
def test_bad_sentinel_urls_name_what_is_wrong(url: str, named: str) -> None:
    with pytest.raises(ConfigurationError, match=named):
        parse_sentinel_url(url)


def test_a_bad_sentinel_url_never_shows_its_password() -> None:
    with pytest.raises(ConfigurationError) as caught:
        parse_sentinel_url("redis+sentinel://:hunter2@h:x/svc")
    assert "hunter2" not in str(caught.value)
    assert ":***@" in str(caught.value)


def test_refresh_on_read_is_one_round_trip_over_every_key_of_the_thread() -> None:
    core = make_core(ttl=30, refresh_on_read=True)
    tk = core.keys.thread("t")
    (op,) = list(reads.refresh_ttl(core, tk))
    assert isinstance(op, Script) and op.name == "refresh"
    assert (op.keys, op.args) == (tk.all(), [30])
    assert tk.lease not in op.keys  # the lease keeps its own clock
    assert list(reads.refresh_ttl(make_core(ttl=30), tk)) == []  # off by default


@pytest.mark.parametrize(
    "strategy, keep_last, named",
    [("keep_none", None, "unknown prune strategy"), ("keep_latest", -1, "keep_last")],
)
def test_bad_prune_arguments_name_what_is_wrong(strategy: str, keep_last: Any, named: str) -> None:
    with pytest.raises(ConfigurationError, match=named):
        next(make_core().prune(["t"], strategy=strategy, keep_last=keep_last))
