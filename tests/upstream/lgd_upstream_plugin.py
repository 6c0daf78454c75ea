"""A pytest plugin loaded into LangGraph's own test suite (the tests of the installed
langgraph's sdist), run by ``tests/helpers/langgraph_suites.py``.

It owns three things:

- ``sync_checkpointer`` and ``async_checkpointer``: fixtures with two params each,
  ``memory`` (LangGraph's own reference fixture, an ``InMemorySaver`` that also asserts
  checkpoints are not mutated after ``put``) and ``durable`` (our ``RedisSaver`` /
  ``AsyncRedisSaver`` on the server in ``LGD_UPSTREAM_REDIS_URL``, each under a key prefix
  of its own that is deleted afterwards). The runner appends one import of them to the
  downloaded ``tests/conftest.py``, so they replace LangGraph's (a later binding wins).
- Deselecting every test that takes neither fixture: they do not touch a checkpointer.
- A JSON file (``LGD_UPSTREAM_RESULTS``) with one row per test: the test, its params
  other than the checkpointer, which checkpointer, and how it ended. The runner compares
  the two checkpointers' rows of each test.

It imports nothing from our ``tests`` package: in LangGraph's run, ``tests`` is theirs.
"""

from __future__ import annotations

import json
import os
import secrets
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
import redis

from langgraph_durable import AsyncRedisSaver, RedisSaver

CHECKPOINTER_FIXTURES = ("sync_checkpointer", "async_checkpointer")
VARIANTS = ("memory", "durable")
# Test ids name the saver; each is a token no other param of LangGraph's tests uses, so
# the id of a test with the other saver is found by replacing it.
SYNC_IDS = ("InMemorySaver", "RedisSaver")
ASYNC_IDS = ("InMemorySaver", "AsyncRedisSaver")
SAVER_IDS = frozenset(SYNC_IDS + ASYNC_IDS)


def _memory_checkpointer() -> Any:
    # LangGraph's own reference fixture, from their conftest (imported late: ``tests``
    # is their package only once their conftest is being loaded).
    from tests.conftest_checkpointer import _checkpointer_memory

    return _checkpointer_memory()


def _redis_url() -> str:
    url = os.environ.get("LGD_UPSTREAM_REDIS_URL")
    if not url:
        raise RuntimeError("LGD_UPSTREAM_REDIS_URL is not set: the runner sets it")
    return url


@pytest.fixture(scope="session")
def _lgd_redis() -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(_redis_url())
    yield client
    client.close()


def _new_prefix() -> str:
    # not uuid.uuid4: LangGraph's tests replace it with a counter (deterministic_uuids)
    return f"lgdup-{secrets.token_hex(6)}"


def _delete_prefix(client: redis.Redis, prefix: str) -> None:
    keys = list(client.scan_iter(match=prefix + ":*", count=1000))
    for start in range(0, len(keys), 500):
        client.unlink(*keys[start : start + 500])


@pytest.fixture(params=VARIANTS, ids=SYNC_IDS)
def sync_checkpointer(request: pytest.FixtureRequest, _lgd_redis: redis.Redis) -> Iterator[Any]:
    if request.param == "memory":
        with _memory_checkpointer() as checkpointer:
            yield checkpointer
        return
    prefix = _new_prefix()
    try:
        with RedisSaver.from_conn_string(_redis_url(), key_prefix=prefix) as saver:
            yield saver
    finally:
        _delete_prefix(_lgd_redis, prefix)


@pytest.fixture(params=VARIANTS, ids=ASYNC_IDS)
async def async_checkpointer(
    request: pytest.FixtureRequest, _lgd_redis: redis.Redis
) -> AsyncIterator[Any]:
    if request.param == "memory":
        with _memory_checkpointer() as checkpointer:
            yield checkpointer
        return
    prefix = _new_prefix()
    try:
        async with AsyncRedisSaver.from_conn_string(_redis_url(), key_prefix=prefix) as saver:
            yield saver
    finally:
        _delete_prefix(_lgd_redis, prefix)


# -- which tests run, and what is recorded of each ------------------------------------
def _variant(item: pytest.Item) -> str | None:
    params = getattr(getattr(item, "callspec", None), "params", {})
    for name in CHECKPOINTER_FIXTURES:
        if name in params:
            return params[name]
    return None


def _case(item: pytest.Item) -> str:
    """The test and its params other than the checkpointer: the same for both variants."""
    base, _, ids = item.nodeid.partition("[")
    parts = ids.removesuffix("]").split("-")
    return base + "[" + "-".join("*" if part in SAVER_IDS else part for part in parts) + "]"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    kept, dropped = [], []
    for item in items:
        variant = _variant(item)
        if variant is None:
            dropped.append(item)
            continue
        item.user_properties.append(("lgd_case", _case(item)))
        item.user_properties.append(("lgd_variant", variant))
        kept.append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


_rows: dict[str, dict[str, Any]] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    props = dict(report.user_properties)
    if "lgd_case" not in props:
        return
    row = _rows.setdefault(
        report.nodeid,
        {"nodeid": report.nodeid, "case": props["lgd_case"], "variant": props["lgd_variant"],
         "outcome": "passed", "detail": ""},
    )  # fmt: skip
    if report.failed:
        row["outcome"] = "failed" if report.when == "call" else "error"
        row["detail"] = (row["detail"] + "\n" + _summary(report)).strip()
    elif report.skipped and row["outcome"] == "passed":
        row["outcome"] = "xfailed" if hasattr(report, "wasxfail") else "skipped"


def _summary(report: pytest.TestReport) -> str:
    crash = getattr(report.longrepr, "reprcrash", None)
    if crash is not None:
        return f"{report.when}: {crash.message}"[:2000]
    return f"{report.when}: {str(report.longrepr)[-2000:]}"


def pytest_sessionfinish(session: pytest.Session) -> None:
    if hasattr(session.config, "workerinput"):  # an xdist worker: the controller writes
        return
    path = os.environ.get("LGD_UPSTREAM_RESULTS")
    if path:
        with open(path, "w", encoding="utf-8") as out:
            json.dump(sorted(_rows.values(), key=lambda r: r["nodeid"]), out, indent=0)
