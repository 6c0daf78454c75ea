"""The one driver: runs a plan's operations on a redis-py client, sync or asyncio.

Owns how each operation of ``core/ops.py`` becomes client calls, and the two loops that
make those calls (``run_calls`` for ``RedisSaver``, ``arun_calls`` for
``AsyncRedisSaver``): every round trip the saver makes passes through them. Theory of
operation: ``Driver._steps(plan)`` runs the plan and, for every operation, yields the
client calls it takes as zero-argument callables (and each ``Emit`` as it is, and a
``Pause`` to wait before a call goes again). The sync loop calls each one; the async
loop awaits what it returns (redis-py's asyncio client has the same methods, returning
coroutines). A call that raised is thrown back in, so catching a reply error is written
once too. Rules it keeps:
  * A call that lost its server goes again until ``failover_timeout`` (``failover.py``),
    unless it is marked ``once``: then the plan step that yielded it decides. So does a
    batch with a lost connection among its replies (redis-py's cluster pipeline returns
    what it met following MOVED command by command, unless told to raise).
  * A script goes as EVALSHA (``scripts.py``). Redis answering NOSCRIPT (restarted,
    SCRIPT FLUSH) loads the scripts and sends the call again, once: safe because every
    operation a plan yields is idempotent.
  * A refused script call is typed through ``reply_codes.py``; a batch raises its first
    error, typed, unless it asked for ``errors_as_values``.
  * ``WAIT`` has no key: on a cluster it goes to the node that holds the write's key.
  * A batch is one round trip (``wire.py`` on one server, redis-py's pipeline on a
    cluster). Its ``ahead`` commands share it, except in a cluster transaction (MULTI is
    one slot there): then they go first, as their own pipeline.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import partial
from itertools import compress, repeat
from typing import TYPE_CHECKING, Any, TypeVar

from redis.exceptions import NoScriptError, ResponseError

from langgraph_durable.core import reply_codes
from langgraph_durable.core.errors import ConfigurationError
from langgraph_durable.core.ops import (
    Batch,
    Command,
    Emit,
    Note,
    Operation,
    Plan,
    ScanKeys,
    Script,
)
from langgraph_durable.io import compat, connect, hazards, pipelines, wire
from langgraph_durable.io.failover import Failover, is_failover
from langgraph_durable.io.loops import Pause, Steps
from langgraph_durable.io.pipelines import Call
from langgraph_durable.io.scripts import ScriptSet, server_version
from langgraph_durable.io.telemetry import (
    NO_TELEMETRY,
    OperationCancelled,
    Scope,
    Telemetry,
    server_attributes,
)

if TYPE_CHECKING:
    from langgraph_durable.core.saver_core import SaverCore

logger = logging.getLogger("langgraph_durable")
T = TypeVar("T")
_EXCEPTION = repeat(Exception)  # map(isinstance, replies, _EXCEPTION): in C, never exhausted


class Driver:
    """What the sync and async savers share to run plans on their client."""

    client: Any
    cluster: bool
    _owns_client: bool  # made from a URL: the saver closes it
    core: SaverCore
    failover: Failover
    ttl: int | None
    _scripts: ScriptSet
    telemetry: Telemetry = NO_TELEMETRY  # options.py sets the saver's (telemetry.py)
    # wire.round_trip (sync) or wire.around_trip (asyncio): a batch's one round trip
    _wire: Callable[..., Any] | None = None
    _wire_call: Callable[..., Any] | None = None  # wire.call or wire.acall: one command
    _wires = False  # round trips go through wire.py: one server, a plain client (_use_client)

    def _use_client(self, client: Any, *, asyncio: bool, **where: Any) -> None:
        """Run on ``client``, or on one made as ``where`` says (``compat.open_client``)."""
        # a write's WAIT may take replica_timeout in its round trip: its reply deadline
        waits = self.core.replica_timeout_ms / 1000 if self.core.wait_for_replicas else 0.0
        self.client, self._owns_client = compat.open_client(
            type(self), client, asyncio=asyncio, replica_timeout=waits, **where
        )
        self.failover.sentinel = bool(connect.sentinel_clients(self.client))
        if self.core.wait_for_replicas and _single_connection(self.client):
            raise ConfigurationError(
                "wait_for_replicas needs a client with a connection pool: a "
                "single_connection_client sends its batches on another connection than "
                "WAIT, which counts only the writes of its own connection"
            )
        self.cluster = connect.is_cluster(self.client)
        # whether round trips go through wire.py: the client's kind does not change
        self._wires = self._wire is not None and not self.cluster and wire.usable(self.client)
        self._scripts = ScriptSet()  # until setup() knows the server
        self.telemetry.use_server(server_attributes(self.client))

    def _steps(self, plan: Plan[T]) -> Steps[T]:
        reply: Any = None
        what: Operation | None = getattr(plan, "operation", None)  # a traced plan
        scope: Scope | None = None
        if what is not None:
            plan = plan.plan  # type: ignore[attr-defined]  # stepped itself: a call less a step
            scope = self.telemetry.begin(what.name, place=what.place)
        error: BaseException | None = None
        in_flight = False  # a round trip sent and not answered: closing now cancels it
        try:
            while True:
                try:
                    op = plan.send(reply)
                except StopIteration as stop:
                    return stop.value  # type: ignore[no-any-return]
                reply = None
                if isinstance(op, Emit):
                    yield op
                elif isinstance(op, Note):
                    if scope is not None:
                        scope.note(op.event, op.attributes)
                    else:
                        self.telemetry.count(op.event, op.attributes)
                elif scope is None:
                    reply = yield from self._op_steps(op)
                else:
                    scope.sending(op)
                    in_flight = True
                    reply = yield from _counted(self._op_steps(op), scope)
                    in_flight = False
        except GeneratorExit:  # a listing its caller stopped reading is no failure
            if in_flight:
                error = OperationCancelled("stopped with a round trip in flight")
            raise
        except BaseException as exc:
            error = exc
            raise
        finally:
            if scope is not None:
                scope.end(error)

    def _op_steps(self, op: Any) -> Steps[Any]:
        if isinstance(op, Script):
            # NOSCRIPT: load the scripts and send again; lost again (a failover between
            # the load and the call), send the source itself (EVAL): no NOSCRIPT there
            for whole in (False, False, True):
                command = self._scripts.command(op.name + op.layout, op.keys, op.args, whole=whole)
                try:
                    return (yield self._call(command))
                except ResponseError as exc:
                    if whole or not isinstance(exc, NoScriptError):
                        raise reply_codes.typed(self.core.keys, op, exc) from None
                    yield from self._load_scripts()
        if isinstance(op, Command):
            return (yield self._call(op.args))
        if isinstance(op, Batch):
            commands = self._batch_commands(op)
            ahead = list(op.ahead)
            if ahead and self.cluster and op.atomic:
                _log_errors(ahead, (yield pipelines.pipelined(self.client, ahead, False)))
                ahead = []
            wait = [("WAIT", *op.wait_replicas)] if op.wait_replicas else []
            # the retry state, made at the first failure (a round trip that goes through
            # needs none)
            reloads, attempts = 0, None
            while True:
                if self._wires:
                    results = yield partial(
                        self._wire,
                        self.client,
                        [*ahead, *commands],
                        op.atomic,
                        wait,
                        lost=self.failover.lost,
                    )
                elif wait and self.cluster:  # WAIT on the batch's own connection
                    if ahead:
                        _log_errors(ahead, (yield pipelines.pipelined(self.client, ahead, False)))
                        ahead = []
                    results = yield pipelines.node_round_trip(
                        self.client, op, commands, wait[0], self.failover.lost
                    )
                else:
                    results = yield pipelines.pipelined(self.client, [*ahead, *commands], op.atomic)
                    if wait:  # its own call: the same connection only where there is one
                        try:
                            acked = yield pipelines.wait_call(
                                self.client, self.cluster, wait[0], op.commands
                            )
                        except Exception as exc:  # noqa: BLE001 - a lost WAIT: see below
                            # WAIT alone on a fresh connection would count none of the
                            # write's bytes: the whole batch goes again
                            attempts = attempts or self.failover.attempts()
                            yield Pause(attempts.again(exc))
                            continue
                        results = [*results, acked]
                if ahead:
                    _log_errors(ahead, results[: len(ahead)])
                    results = results[len(ahead) :]
                # the replies that are errors, in one pass (usually none)
                errors = list(compress(results, map(isinstance, results, _EXCEPTION)))
                # refused, not run, or its connection lost (redis-py's cluster pipeline
                # hands back as a reply what it met following MOVED alone): again
                lost = next((r for r in errors if is_failover(r)), None) if errors else None
                if lost is not None and not op.best_effort:
                    attempts = attempts or self.failover.attempts()
                    yield Pause(attempts.again(lost))
                    continue
                if errors and any(isinstance(r, NoScriptError) for r in errors):
                    # as for one script (above): load and resend, then send the sources
                    reloads += 1
                    yield from self._load_scripts()
                    commands = self._batch_commands(op, whole=reloads >= 2)
                    continue
                if wait and _too_few(results[-1], op.wait_replicas[0]):
                    # during a failover, the new primary's replicas re-attach: ask again
                    attempts = attempts or self.failover.attempts()
                    delay = attempts.should_wait_again()
                    if delay is not None:
                        yield Pause(delay)
                        continue
                error = (
                    None
                    if op.errors_as_values
                    else reply_codes.first_error(self.core.keys, op, results)
                )
                if error is not None:
                    raise error
                return results
        if isinstance(op, ScanKeys):
            return (yield partial(pipelines.scan_keys, self.client, op.pattern))
        raise TypeError(f"unknown operation {op!r}")

    def _batch_commands(self, op: Batch, whole: bool = False) -> list[Any]:
        return [
            self._scripts.command(c.name + c.layout, c.keys, c.args, whole=whole)
            if isinstance(c, Script)
            else c
            for c in op.commands
        ]

    def _call(self, command: tuple[Any, ...]) -> Call:
        """The call that sends one command: ``wire.py`` on one server, else redis-py."""
        if self._wires:
            return partial(self._wire_call, self.client, *command, lost=self.failover.lost)
        return partial(self.client.execute_command, *command)

    def _load_scripts(self) -> Steps[None]:
        for source in self._scripts.sources():
            yield partial(self.client.script_load, source)

    def _setup_steps(self) -> Steps[None]:
        """Learn the server's version, load the scripts, warn once if Redis may evict."""
        try:
            info = yield partial(self.client.info, "server")
            version = server_version(info)
        except ResponseError:  # INFO not allowed (ACL): assume Redis 6.2
            version = None
        self._scripts = ScriptSet.for_server(version, cluster=self.cluster)
        yield from self._load_scripts()
        yield from hazards.eviction_checks(self.client, self.ttl)
        if self.core.repair_on_read:  # a saver that may write (not the CLI's inspection)
            yield from self._steps(self.core.index_runs())


def _counted(steps: Steps[T], scope: Scope) -> Steps[T]:
    """``steps``, each call counted as a round trip in ``scope`` with what came back."""
    reply: Any = None
    error: BaseException | None = None
    while True:
        try:
            step = steps.send(reply) if error is None else steps.throw(error)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]
        counted = not isinstance(step, Emit | Pause)
        if counted:
            scope.sent()
        try:
            reply, error = (yield step), None
        except Exception as exc:  # noqa: BLE001 - thrown back into the steps, as it came
            reply, error = None, exc
        else:
            if counted:
                scope.received(reply)


def _log_errors(commands: list[tuple[Any, ...]], replies: list[Any]) -> None:
    for command, reply in zip(commands, replies):
        if isinstance(reply, Exception):
            logger.warning("langgraph-durable: %s %s failed: %s", command[0], command[1], reply)


def _single_connection(client: Any) -> bool:
    return bool(
        getattr(client, "single_connection_client", False)
        or getattr(client, "_single_connection_client", False)
        or getattr(client, "connection", None) is not None
    )


def _too_few(acked: Any, wanted: int) -> bool:
    """Whether a WAIT reply counts fewer replicas than ``wanted`` (an error reply is
    raised by the plan as it is)."""
    return not isinstance(acked, Exception) and int(acked) < wanted
