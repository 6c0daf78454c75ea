"""The ledger against real crashes: worker processes SIGKILLed at every boundary of a
tool call and of LangGraph's checkpoint writes, and at random moments, restarted until
the run completes. Escalations are answered from the effect file, as a human would.

Every non-idempotent effect must happen exactly once, retries must reuse the call's
idempotency key, and the final conversation must equal an uninterrupted run's; for
durability "sync" and "async". (The soak, 1000+ kills: python -m tests.helpers.kill_harness.)
"""

from __future__ import annotations

import os
import random
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from tests.helpers.kill_harness import (
    POINTS,
    check_world,
    final_messages,
    reference_messages,
    run_until_done,
)
from tests.helpers.ledger_agent import Effects

RANDOM_RUNS = int(os.environ.get("LGD_RANDOM_KILL_RUNS", "2"))


@pytest.fixture(scope="module")
def reference(redis_url: str) -> list[Any]:
    return reference_messages(redis_url)


def scenario(
    redis_url: str, prefix: str, tmp: str, durability: str, mode: str, **kills: Any
) -> tuple[int, str, list[Any], Effects]:
    effects_path = os.path.join(tmp, "effects")
    outcome = run_until_done(
        redis_url, prefix, "t", effects_path, durability=durability, mode=mode, **kills
    )
    world = Effects(effects_path)
    return outcome.kills, effects_path, final_messages(redis_url, prefix, "t"), world


@pytest.mark.parametrize("durability", ["sync", "async"])
def test_sigkill_at_every_boundary_repeats_no_effect(
    redis_url: str, key_prefix: str, tmp_path: Any, reference: list[Any], durability: str
) -> None:
    """One run per boundary (alternating the sync and async APIs), killed the second time
    it gets there: in round 0 for tool boundaries, mid-run for checkpoint writes."""

    def one(i: int, point: str) -> tuple[str, int]:
        tmp = tmp_path / point
        tmp.mkdir()
        mode = ("sync", "async")[i % 2]
        kills, _, final, world = scenario(
            redis_url, f"{key_prefix}{i}", str(tmp), durability, mode, kill_at=(point, 2)
        )
        check_world(world, final, reference)
        return point, kills

    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(one, range(len(POINTS)), POINTS))
    assert [kills for _, kills in results] == [1] * len(POINTS)  # each boundary was hit


@pytest.mark.parametrize("durability", ["sync", "async"])
def test_random_sigkills_repeat_no_effect(
    redis_url: str, key_prefix: str, tmp_path: Any, reference: list[Any], durability: str
) -> None:
    rng = random.Random(f"ledger-{durability}")
    seeds = [rng.random() for _ in range(RANDOM_RUNS)]  # here: pool threads race for rng

    def one(i: int) -> int:
        tmp = tmp_path / str(i)
        tmp.mkdir()
        mode = ("sync", "async")[i % 2]
        kills, _, final, world = scenario(
            redis_url,
            f"{key_prefix}{i}",
            str(tmp),
            durability,
            mode,
            random_kills=5,
            rng=random.Random(seeds[i]),
        )
        check_world(world, final, reference)
        return kills

    with ThreadPoolExecutor(max_workers=2) as pool:
        kills = list(pool.map(one, range(RANDOM_RUNS)))
    # a kill can land after a worker finished its run (it is held alive for it)
    assert kills == [5] * RANDOM_RUNS, kills
