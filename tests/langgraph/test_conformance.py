"""LangGraph's checkpointer conformance suite, every base and extended capability.

Runs against AsyncRedisSaver, RedisSaver's own async twins, and RedisSaver through a
thin adapter whose async methods call the sync ones directly (as a sync-only user would).
The report is printed, so `pytest -s` (and CI's log) shows it.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
import redis
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.capabilities import ALL_CAPABILITIES
from langgraph.checkpoint.conformance.report import ProgressCallbacks

from langgraph_durable import AsyncRedisSaver, RedisSaver
from tests.helpers.redis_keys import delete_prefix


class SyncAdapter(RedisSaver):
    """Async methods that call RedisSaver's sync methods on the loop thread."""

    async def aget_tuple(self, config):  # type: ignore[override]
        return self.get_tuple(config)

    async def alist(self, config, *, filter=None, before=None, limit=None):  # type: ignore[override]
        for item in self.list(config, filter=filter, before=before, limit=limit):
            yield item

    async def aput(self, config, checkpoint, metadata, new_versions):  # type: ignore[override]
        return self.put(config, checkpoint, metadata, new_versions)

    async def aput_writes(self, config, writes, task_id, task_path=""):  # type: ignore[override]
        return self.put_writes(config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id):  # type: ignore[override]
        return self.delete_thread(thread_id)

    async def adelete_for_runs(self, run_ids):  # type: ignore[override]
        return self.delete_for_runs(run_ids)

    async def acopy_thread(self, source_thread_id, target_thread_id):  # type: ignore[override]
        return self.copy_thread(source_thread_id, target_thread_id)

    async def aprune(self, thread_ids, *, strategy="keep_latest"):  # type: ignore[override]
        return self.prune(thread_ids, strategy=strategy)


def _register(name: str, make: Any, redis_url: str, prefixes: list[str]):
    async def factory() -> AsyncIterator[Any]:
        prefix = f"lgdconf-{uuid.uuid4().hex[:10]}"
        prefixes.append(prefix)
        async with make(redis_url, prefix) as saver:
            yield saver

    return checkpointer_test(name=name)(factory)


def _async_saver(url: str, prefix: str):
    return AsyncRedisSaver.from_conn_string(url, key_prefix=prefix)


class _SyncCM:
    def __init__(self, cls: type[RedisSaver], url: str, prefix: str) -> None:
        self.cm = cls.from_conn_string(url, key_prefix=prefix)

    async def __aenter__(self) -> RedisSaver:
        return self.cm.__enter__()

    async def __aexit__(self, *exc: object) -> None:
        self.cm.__exit__(*exc)


@pytest.mark.parametrize(
    "name, make",
    [
        ("AsyncRedisSaver", _async_saver),
        ("RedisSaver", lambda url, prefix: _SyncCM(RedisSaver, url, prefix)),
        ("RedisSaver (sync adapter)", lambda url, prefix: _SyncCM(SyncAdapter, url, prefix)),
    ],
)
async def test_conformance(
    name: str, make: Any, redis_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    prefixes: list[str] = []
    registered = _register(name, make, redis_url, prefixes)
    try:
        report = await validate(registered, progress=ProgressCallbacks.verbose())
    finally:
        client = redis.Redis.from_url(redis_url)
        for prefix in prefixes:
            delete_prefix(client, prefix)
        client.close()
    with capsys.disabled():  # the report belongs in the test output, pass or fail
        report.print_report()
    results = report.results
    assert {c.value for c in ALL_CAPABILITIES} <= set(results), results.keys()
    failures = {cap: r.failures for cap, r in results.items() if not (r.detected and r.passed)}
    assert not failures, failures
    assert all(r.tests_passed > 0 for r in results.values()), {
        cap: r.tests_passed for cap, r in results.items()
    }
