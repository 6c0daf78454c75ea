"""Riding out a failover: a round trip that loses its server is sent again until Redis
answers or the saver's ``failover_timeout`` has passed.

Owns which errors mean "the server went away for a while" and how long a saver waits for
it to come back. Rules it keeps:
  * A round trip (one call of the driver: a script, a batch, a command) that fails with a
    connection error, a timeout, "no master" from Sentinel (``MasterNotFoundError``), a
    demoted master (READONLY), a server still loading its data, a cluster healing or
    resharding (CLUSTERDOWN, MASTERDOWN, TRYAGAIN) or busy with a script over its time
    limit (BUSY), also as one reply of a batch, is sent again on a fresh connection, with
    backoff (50 ms doubling to 1 s), until it succeeds or ``failover_timeout`` seconds
    have passed since the first failed attempt was sent (a round trip without a reply
    within the client's ``socket_timeout`` is a lost server too, and its wait counts);
    then ``FailoverTimeoutError`` says so. Safe
    because every operation a plan yields is idempotent: resending one that ran (its
    reply was lost) stores the same bytes again. redis-py's own ``Retry`` (about 2 s)
    runs inside each attempt; this budget is sized for a Sentinel failover.
  * With ``wait_for_replicas``: a write that fewer replicas acknowledged while a
    failover is under way (a connection error within the last ``failover_timeout``
    seconds, also one redis-py's retry or ``wire.py`` got past: ``lost``) is sent again, with WAIT, on the new primary, until its replicas have
    re-attached (``should_wait_again``); otherwise ``NotReplicatedError`` as always. A
    write is never acknowledged before WAIT says it is replicated.
  * Authentication, permission and TLS errors are no failover: raised at once. Nor is
    an error before the saver's first round trip got through (a wrong URL, a server not
    started): raised after redis-py's own retries, as always; except behind Sentinel,
    when the sentinels answer: a worker started during a failover waits it out too.
Sans-I/O: ``Failover`` only decides; the sync and asyncio drivers sleep and call.
"""

from __future__ import annotations

import logging
import math
import random
import re
import time
from collections.abc import Callable
from typing import Any

from redis.exceptions import (
    AuthenticationError,
    AuthorizationError,
    ClusterDownError,
    ClusterError,
    ConnectionError,
    ReadOnlyError,
    ResponseError,
    TimeoutError,
    TryAgainError,
)

from langgraph_durable.core.errors import ConfigurationError, DurableError

logger = logging.getLogger("langgraph_durable")


class FailoverTimeoutError(DurableError, ConnectionError):
    """Redis did not answer for longer than the saver's ``failover_timeout``.

    Every round trip that lost its server (a failover, a restart, a network cut) was sent
    again until then; the last one was not acknowledged. A redis-py
    ``ConnectionError`` too, so code that catches those catches this. Resume the run once
    Redis answers: it continues from its last checkpoint.
    """

    def __init__(self, *, waited: float, timeout: float, last_error: str = "") -> None:
        super().__init__(
            f"Redis did not answer for {waited:.1f} s (a failover or restart longer than "
            f"failover_timeout={timeout:g} s?; last error: {last_error or 'none'}); "
            "the write may or may not be stored, and was not acknowledged: run the graph "
            "again once Redis answers, it resumes from its last checkpoint"
        )
        self.waited = waited
        self.timeout = timeout
        self.last_error = last_error


DEFAULT_FAILOVER_TIMEOUT = 15.0  # a Sentinel failover takes seconds; 10 s is a slow one
FIRST_BACKOFF = 0.05
MAX_BACKOFF = 1.0


# Refusals of this client (credentials, permissions, TLS) that redis-py reports as
# connection errors, or only as text inside Sentinel's "no master found": no failover.
_REFUSALS = (
    "AuthenticationError",
    "AuthorizationError",
    "WRONGPASS",
    "NOAUTH",
    "NOPERM",
    "certificate verify failed",
    "CERTIFICATE_VERIFY_FAILED",
    "wrong version number",  # TLS spoken to a plain port, or the reverse
)


# Server states that pass, each refusing a command without running it, so sending it
# again is safe: a demoted primary (READONLY: a managed endpoint that moved, a Sentinel
# failover seen through a plain connection), a cluster healing or resharding
# (CLUSTERDOWN, MASTERDOWN, TRYAGAIN, and redis-py's cluster client giving up on
# TRYAGAIN and redirects of a slot being migrated: "TTL exhausted"), a script over its
# time limit (BUSY), a WAIT cut short because its primary was just demoted (UNBLOCKED:
# the batch's writes are on a replica-to-be, which drops them: send it to the new one).
_PASSING = (ReadOnlyError, ClusterDownError, TryAgainError)


# The same refusals met by a write inside a script: Redis reports them as the script's
# error ("user_script:64: READONLY You can't write...", Redis 7; "ERR Error running
# script ... -READONLY ...", Redis 6.2), which redis-py cannot type.
_IN_SCRIPT = re.compile(
    r"(?:user_script:\d+: |@user_script: ?\d+: -)(READONLY|MASTERDOWN|CLUSTERDOWN|TRYAGAIN|LOADING) "
)


def passing_state(exc: BaseException) -> bool:
    """Whether ``exc`` is a refusal by a server in a state that passes (``_PASSING``)."""
    return (
        isinstance(exc, _PASSING)
        or (isinstance(exc, ResponseError) and str(exc).startswith(("BUSY ", "UNBLOCKED ")))
        or (isinstance(exc, ResponseError) and _IN_SCRIPT.search(str(exc)) is not None)
        or (isinstance(exc, ClusterError) and "TTL exhausted" in str(exc))
    )


def is_failover(exc: BaseException) -> bool:
    """Whether ``exc`` says the server went away for a while, or is in a state that
    passes (not a refusal of the client itself: a wrong password, a missing permission
    or a certificate that does not verify is raised at once)."""
    if isinstance(exc, (AuthenticationError, AuthorizationError)):
        return False
    if passing_state(exc):
        return True
    # Sentinel's "no master found" carries each sentinel's error only as text
    return isinstance(exc, (ConnectionError, TimeoutError)) and not any(
        refusal in str(exc) for refusal in _REFUSALS
    )


def check_timeout(value: Any) -> float:
    """``failover_timeout`` as seconds; ``ConfigurationError`` for anything else."""
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value < 0
    ):
        raise ConfigurationError(
            f"failover_timeout must be a number of seconds >= 0, got {value!r}"
        )
    return float(value)


class Failover:
    """One saver's failover budget: whether to send a failed round trip again, and
    after how long. Shared by the saver's threads (what it records is a timestamp)."""

    def __init__(
        self, timeout: float = DEFAULT_FAILOVER_TIMEOUT, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.timeout = timeout
        self.clock = clock
        self.last_failure = float("-inf")  # clock time of the last connection error
        # Set by the drivers once a round trip got through: before that, a connection
        # error is a wrong URL or a server not started, raised after redis-py's retries,
        # unless Sentinel manages the client and its sentinels answered (``sentinel``).
        self.connected = False
        self.sentinel = False  # the client's master is the one its sentinels name

    def sentinel_says_failover(self, exc: BaseException) -> bool:
        """Before a first round trip got through: whether ``exc`` is a failover under
        way behind sentinels that answer (no master named yet, or the master they name
        not answering), not a wrong sentinel address (then every sentinel's own
        connection error is listed after "No master found for 'name' :")."""
        return self.sentinel and not (
            type(exc).__name__ == "MasterNotFoundError" and " : " in str(exc)
        )

    def lost(self, exc: BaseException) -> None:
        """Note a connection error, also one redis-py's retry or ``wire.py`` got past:
        with ``wait_for_replicas``, a failover is under way for ``timeout`` seconds."""
        if is_failover(exc):
            self.last_failure = self.clock()

    def attempts(self) -> _Attempts:
        """The retry state of one round trip."""
        return _Attempts(self)

    def under_way(self) -> bool:
        """Whether a connection error was seen within the last ``timeout`` seconds."""
        return self.clock() - self.last_failure < self.timeout


class _Attempts:
    """The retry state of one round trip: ``again(exc)`` says how long to sleep before
    the next attempt, or raises when the round trip must fail."""

    def __init__(self, failover: Failover) -> None:
        self.failover = failover
        self.started: float | None = None
        self.failures = 0

    def again(self, exc: BaseException, began: float | None = None) -> float:
        """The backoff before sending the round trip again after ``exc``; raises ``exc``
        itself when it is no failover, ``FailoverTimeoutError`` past the budget.
        ``began``: when the failed attempt was sent (its clock time): a reply that never
        came (a read timeout) spent the budget from then, not from the error."""
        if not is_failover(exc) or self.failover.timeout <= 0:
            raise exc
        if not self.failover.connected and not self.failover.sentinel_says_failover(exc):
            raise exc
        self.failover.lost(exc)
        now = self.failover.clock()
        if self.started is None:
            self.started = now if began is None else min(began, now)
            logger.warning(
                "langgraph-durable: lost Redis (%s: %s): sending again for up to %.0f s "
                "(failover_timeout)",
                type(exc).__name__,
                exc,
                self.failover.timeout,
            )
        waited = now - self.started
        if waited >= self.failover.timeout:
            raise FailoverTimeoutError(
                waited=waited,
                timeout=self.failover.timeout,
                last_error=f"{type(exc).__name__}: {exc}",
            ) from exc
        self.failures += 1
        return self.backoff(self.failover.timeout - waited)

    def should_wait_again(self) -> float | None:
        """With ``wait_for_replicas``, a write too few replicas acknowledged: the backoff
        before sending it again when a failover is under way (its replicas re-attach to
        the new primary), else None (``NotReplicatedError``)."""
        if not self.failover.under_way():
            return None
        now = self.failover.clock()
        if self.started is None:
            self.started = now
        if now - self.started >= self.failover.timeout:
            return None
        self.failures += 1
        return self.backoff(self.failover.timeout - (now - self.started))

    def backoff(self, left: float) -> float:
        ceiling = min(MAX_BACKOFF, FIRST_BACKOFF * 2 ** (self.failures - 1))
        return min(left, random.uniform(ceiling / 2, ceiling))  # equal jitter
