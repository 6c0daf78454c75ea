"""The failover budget's decisions (``failover.py``), on a clock the test moves."""

from __future__ import annotations

import pytest
from redis.exceptions import (
    AskError,
    AuthenticationError,
    BusyLoadingError,
    ClusterDownError,
    ClusterError,
    ConnectionError,
    MovedError,
    ReadOnlyError,
    ResponseError,
    TimeoutError,
    TryAgainError,
)
from redis.sentinel import MasterNotFoundError

from langgraph_durable.core.errors import ConfigurationError
from langgraph_durable.io.failover import (
    Failover,
    FailoverTimeoutError,
    check_timeout,
    is_failover,
    passing_state,
)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_what_counts_as_a_failover() -> None:
    for lost in (ConnectionError("refused"), TimeoutError(), BusyLoadingError(),
                 MasterNotFoundError("No master found for 'mymaster'")):  # fmt: skip
        assert is_failover(lost), lost
    tls = ConnectionError(
        "Error 1 connecting: [SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed"
    )
    for refused in (AuthenticationError("WRONGPASS"), ResponseError("ERR"), ValueError(), tls,
                    MasterNotFoundError("No master found for 'x' : ... - auth:AuthenticationError")):  # fmt: skip
        assert not is_failover(refused), refused


def test_which_server_states_pass() -> None:
    """Refusals of a command not run, by a server in a state that passes: sent again."""
    for passing in (ReadOnlyError("READONLY"), ClusterDownError("CLUSTERDOWN"),
                    TryAgainError("TRYAGAIN"), ResponseError("BUSY Redis is busy"),
                    ClusterError("TTL exhausted."),
                    ResponseError("UNBLOCKED force unblock from blocking operation, instance "
                                  "state changed (master -> replica?)"),
                    ResponseError("user_script:64: READONLY You can't write against a read "
                                  "only replica. script: 350f9c36, on @user_script:64."),
                    ResponseError("ERR Error running script (call to f_1): @user_script:64: "
                                  "@user_script: 64: -READONLY You can't write against a read "
                                  "only replica.")):  # fmt: skip
        assert passing_state(passing) and is_failover(passing), passing
    # a redirect is followed by the client itself; anything else is no passing state
    for other in (MovedError("1 127.0.0.1:1"), AskError("1 127.0.0.1:1"),
                  ClusterError("other"), ResponseError("ERR busy"),
                  ResponseError("user_script:9: WRONGTYPE Operation against a key")):  # fmt: skip
        assert not passing_state(other), other


def test_a_round_trip_is_sent_again_until_the_budget_is_spent() -> None:
    clock = Clock()
    failover = Failover(10.0, clock)
    failover.connected = True  # a round trip got through before
    attempts = failover.attempts()
    delays = []
    while clock.now < 109.0:
        delays.append(attempts.again(ConnectionError("gone")))
        clock.now += delays[-1] + 0.5
    assert all(0 < d <= 1.0 for d in delays) and delays[0] <= 0.05  # backoff from 50 ms
    assert failover.under_way()
    clock.now = 110.0
    with pytest.raises(FailoverTimeoutError, match="failover_timeout=10.*still gone") as raised:
        attempts.again(ConnectionError("still gone"))
    assert isinstance(raised.value.__cause__, ConnectionError)
    clock.now = 121.0
    assert not failover.under_way()


def test_no_failover_is_raised_as_it_is() -> None:
    never = Failover(10.0, Clock())  # nothing got through yet: a wrong URL, no server
    with pytest.raises(ConnectionError):
        never.attempts().again(ConnectionError("refused"))
    connected = Failover(10.0, Clock())
    connected.connected = True
    attempts = connected.attempts()
    error = ResponseError("WRONGTYPE")
    with pytest.raises(ResponseError) as raised:
        attempts.again(error)
    assert raised.value is error
    off = Failover(0.0, Clock())  # failover_timeout=0: redis-py's retries only
    off.connected = True
    with pytest.raises(ConnectionError):
        off.attempts().again(ConnectionError("gone"))


def test_a_write_too_few_replicas_have_is_sent_again_only_during_a_failover() -> None:
    clock = Clock()
    failover = Failover(10.0, clock)
    assert failover.attempts().should_wait_again() is None  # no failover: NotReplicatedError
    failover.lost(ConnectionError("reset"))  # even one a retry got past
    attempts = failover.attempts()
    assert attempts.should_wait_again() is not None
    clock.now += 11.0
    assert attempts.should_wait_again() is None  # past the budget: NotReplicatedError


def test_the_timeout_option_is_checked() -> None:
    assert check_timeout(0) == 0.0 and check_timeout(2.5) == 2.5
    for bad in (-1, "15", True, None, float("nan"), float("inf")):
        with pytest.raises(ConfigurationError, match="failover_timeout"):
            check_timeout(bad)
