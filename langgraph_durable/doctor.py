"""Whether a Redis can keep the saver's promises: ``langgraph-durable doctor`` and
``langgraph_durable.doctor.check(url)``.

Connects as an application would, reads what the server says of itself, runs every
script on a scratch thread under a key prefix of its own (removed afterwards: it never
writes outside it), times a ``put`` and a ``get_tuple`` there, and says which rows of the
README's "What survives which crash" table hold on this server and why.

A *problem* makes ``ok`` false (the command exits 1, one line each): an evicting policy,
no persistence at all, scripts refused, permissions missing, a replica given as the
primary, a server older than 6.2. A *warning* is a guarantee this server cannot give but
a deployment may choose to live without (a single server cannot ride a failover).
"""

from __future__ import annotations

import statistics
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import redis

from langgraph_durable.core.redact import redact_url
from langgraph_durable.io import connect
from langgraph_durable.io.hazards import eviction_hazard, policy_of

OK, WARN, PROBLEM, UNKNOWN = "ok", "warn", "problem", "unknown"
# The documented minimal ACL of a read-write worker (docs/operations/security.md).
WORKER_COMMANDS = [
    "ping",
    "info",
    "multi",
    "exec",
    "scan",
    "wait",
    "time",
    "script|load",
    "evalsha",
    "evalsha_ro",
    "get",
    "set",
    "incr",
    "del",
    "unlink",
    "exists",
    "type",
    "rename",
    "expire",
    "pexpire",
    "pttl",
    "persist",
    "hget",
    "hmget",
    "hgetall",
    "hkeys",
    "hvals",
    "hlen",
    "hexists",
    "hstrlen",
    "hset",
    "hsetnx",
    "hdel",
    "sadd",
    "srem",
    "smembers",
    "zadd",
    "zrem",
    "zcard",
    "zscore",
    "zlexcount",
    "zrange",
    "zrevrange",
    "zrangebylex",
    "zrevrangebylex",
]
TIMED = 30  # puts and reads of the realistic checkpoint


@dataclass(frozen=True)
class Check:
    """One line of the report."""

    name: str
    value: str
    status: str  # ok | warn | problem | unknown
    why: str = ""


@dataclass(frozen=True)
class CrashRow:
    """A row of the README's crash table, and whether it holds on this server."""

    what: str
    holds: bool | None  # None: cannot tell (a setting the server would not show)
    why: str


@dataclass
class DoctorReport:
    """What ``check`` found."""

    url: str  # its password masked
    checks: list[Check] = field(default_factory=list)
    crash_rows: list[CrashRow] = field(default_factory=list)

    @property
    def problems(self) -> list[Check]:
        return [c for c in self.checks if c.status == PROBLEM]

    @property
    def ok(self) -> bool:
        return not self.problems


def check(url: str, *, cluster: bool = False, **client_options: Any) -> DoctorReport:
    """Check the Redis at ``url`` as the saver would use it (``client_options`` as for
    ``from_conn_string``: TLS, credentials, timeouts). Never raises for what the server
    refuses: each refusal is a line of the report."""
    from langgraph_durable.saver import RedisSaver

    report = DoctorReport(redact_url(url))
    client = connect.sync_client(RedisSaver, url, cluster=cluster, options=client_options)
    try:
        facts = _facts(client)
        report.checks += _server_checks(facts, url, cluster)
        report.checks += _scratch_checks(url, cluster, client_options, client)
        report.checks += _acl_checks(client)
        report.crash_rows = crash_rows(facts)
    finally:
        client.close()
    return report


def _call(fn: Callable[[], Any]) -> Any:
    """A reply, or the error the server gave instead."""
    try:
        return fn()
    except redis.RedisError as exc:
        return exc


def _facts(client: Any) -> dict[str, Any]:
    info = _call(lambda: client.info("server"))
    if isinstance(info, Mapping) and "redis_version" not in info:  # a cluster: per node
        info = next((v for v in info.values() if isinstance(v, Mapping)), info)
    replication = _call(lambda: client.info("replication"))
    config = {}
    for name in ("appendonly", "appendfsync", "save", "maxmemory-policy"):
        reply = _call(lambda name=name: client.config_get(name))
        if isinstance(reply, Mapping):
            found = {_text(k): _text(v) for k, v in reply.items()}
            config[name] = found.get(name)
        else:
            config[name] = None  # refused (ACL, a managed service) or renamed
    pings = []
    for _ in range(20):
        started = time.perf_counter()
        if isinstance(_call(client.ping), Exception):
            break
        pings.append(time.perf_counter() - started)
    return {"info": info, "replication": replication, "config": config, "pings": pings}


def _server_checks(facts: dict[str, Any], url: str, cluster: bool) -> list[Check]:
    info, replication, config = facts["info"], facts["replication"], facts["config"]
    checks = []
    if isinstance(info, Mapping):
        name = "Valkey" if "valkey_version" in info else str(info.get("server_name") or "Redis")
        version = str(info.get("valkey_version") or info.get("redis_version") or "?")
        too_old = _version(str(info.get("redis_version", "0"))) < (6, 2)
        checks.append(
            Check("server", f"{name} {version}", PROBLEM if too_old else OK,
                  "the saver needs Redis 6.2+ (or Valkey)" if too_old else "")
        )  # fmt: skip
    else:
        checks.append(Check("server", "?", UNKNOWN, f"INFO refused: {info}"))
    mode = "Cluster" if cluster else "Sentinel" if connect.is_sentinel_url(url) else "standalone"
    checks.append(Check("mode", mode, OK))
    role = replication.get("role") if isinstance(replication, Mapping) else None
    if role == "slave":
        checks.append(Check("role", "replica", PROBLEM, "writes are refused: point at the primary"))
    checks.append(_persistence(config))
    checks.append(_eviction(config))
    checks.append(_replicas(replication, mode))
    pings = facts["pings"]
    if pings:
        checks.append(Check("round trip", f"{statistics.median(pings) * 1000:.2f} ms", OK))
    return checks


def _persistence(config: Mapping[str, str | None]) -> Check:
    aof, fsync, save = config["appendonly"], config["appendfsync"], config["save"]
    if aof is None and save is None:
        return Check("persistence", "?", UNKNOWN, "CONFIG GET refused: check appendonly yourself")
    if aof == "yes":
        why = "" if fsync == "always" else "a power loss may lose about a second of writes"
        return Check("persistence", f"AOF, appendfsync {fsync}", OK, why)
    if save:
        return Check("persistence", f"RDB snapshots only ({save})", WARN,
                     "a restart loses every write since the last snapshot: set appendonly yes")  # fmt: skip
    return Check("persistence", "none", PROBLEM,
                 "a restart loses every thread: set appendonly yes")  # fmt: skip


def _eviction(config: Mapping[str, str | None]) -> Check:
    policy = policy_of(
        {"maxmemory-policy": config["maxmemory-policy"]} if config["maxmemory-policy"] else {}
    )
    if policy is None:
        return Check("eviction", "?", UNKNOWN, "CONFIG GET refused: it must be noeviction")
    hazard = eviction_hazard(policy, ttl=1)
    if policy.startswith("allkeys-"):
        return Check("eviction", policy, PROBLEM, f"{hazard}: set maxmemory-policy noeviction")
    if hazard:
        return Check("eviction", policy, WARN, f"with a saver ttl, {hazard[0].lower()}{hazard[1:]}")
    return Check("eviction", policy, OK)


REPLICA_LAG_WARN_S = 5  # seconds since a replica last acknowledged: more is not in sync


def _replicas(replication: Any, mode: str) -> Check:
    if not isinstance(replication, Mapping):
        return Check("replicas", "?", UNKNOWN, f"INFO replication refused: {replication}")
    count = int(replication.get("connected_slaves") or 0)
    if not count:
        return Check("replicas", "none", WARN,
                     "cannot ride a failover; wait_for_replicas cannot be met")  # fmt: skip
    head = int(replication.get("master_repl_offset") or 0)
    each = [v for k, v in replication.items() if str(k)[:5] == "slave" and isinstance(v, Mapping)]
    lag = max((int(v.get("lag", 0)) for v in each), default=0)
    behind = max((head - int(v.get("offset", head)) for v in each), default=0)
    value = f"{count} (lag {lag} s, {behind:,} bytes behind)"
    if any(v.get("state") != "online" for v in each) or lag > REPLICA_LAG_WARN_S:
        why = "a replica is not in sync: a failover now loses what it lacks, and WAIT waits"
    elif mode == "standalone":
        why = "no Sentinel or Cluster in the URL: nothing promotes a replica"
    else:
        return Check(
            "replicas", value, OK, f"set wait_for_replicas={count}: every replica holds a write"
        )
    return Check("replicas", value, WARN, why)


def _scratch_checks(
    url: str, cluster: bool, options: Mapping[str, Any], client: Any
) -> list[Check]:
    """Every script on a scratch thread under a prefix of its own, then timings; the
    prefix is emptied afterwards whatever happened."""
    from langgraph.checkpoint.base import create_checkpoint, empty_checkpoint

    from langgraph_durable.ledger import ToolLedger
    from langgraph_durable.saver import RedisSaver

    prefix = f"lgd-doctor-{uuid.uuid4().hex[:12]}"
    checks = []
    try:
        with RedisSaver.from_conn_string(
            url, key_prefix=prefix, cluster=cluster, failover_timeout=0, **options
        ) as saver:
            config: Any = {"configurable": {"thread_id": "doctor", "checkpoint_ns": ""}}
            values = {"messages": ["x" * 1500 for _ in range(10)]}  # a realistic state
            puts, reads = [], []
            parent = empty_checkpoint()
            for step in range(TIMED):
                checkpoint = create_checkpoint(parent, None, step)
                checkpoint["channel_values"] = {**values, "step": step}
                checkpoint["channel_versions"] = {"messages": step + 1, "step": step + 1}
                started = time.perf_counter()
                config = saver.put(
                    config, checkpoint, {"step": step}, {"messages": step + 1, "step": step + 1}
                )
                puts.append(time.perf_counter() - started)
                started = time.perf_counter()
                saver.get_tuple({"configurable": {"thread_id": "doctor"}})
                reads.append(time.perf_counter() - started)
                parent = checkpoint
            saver.put_writes(config, [("messages", "y")], "task-1")
            list(saver.list({"configurable": {"thread_id": "doctor"}}, limit=10))
            ToolLedger(saver).entries("doctor")
            with saver.lease("doctor"):
                pass
            if cluster:
                checks.append(_hash_tags(client, saver.keys.thread("doctor").with_twins()))
            report = saver.verify("doctor")
            if not report.ok:
                checks.append(Check("scripts", "ran", PROBLEM, f"verify found {report.findings}"))
            else:
                checks.append(Check("scripts", "every one loads and runs", OK))
            checks.append(Check("put", _percentiles(puts), OK, "a 15 KB checkpoint"))
            checks.append(Check("get_tuple", _percentiles(reads), OK, "the same"))
            saver.delete_thread("doctor")
    except Exception as exc:  # noqa: BLE001 - a refusal is the finding
        text = " ".join(str(exc).split())[:300]
        checks.append(Check("scripts", "refused", PROBLEM, f"{type(exc).__name__}: {text}"))
    finally:
        _remove_prefix(client, prefix)
    return checks


def _hash_tags(client: Any, keys: list[str]) -> Check:
    """Whether the cluster puts every key of a thread in one slot (the hash tag in the
    key prefix): each write of the saver is one script over them."""
    slots = {client.keyslot(key) for key in keys}
    if len(slots) == 1:
        return Check("hash tags", f"a thread's {len(keys)} keys in one slot", OK)
    return Check("hash tags", f"{len(slots)} slots", PROBLEM,
                 "this cluster ignores hash tags: the saver's scripts cannot run")  # fmt: skip


def _percentiles(seconds: list[float]) -> str:
    ordered = sorted(seconds)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return f"p50 {statistics.median(ordered) * 1000:.2f} ms, p99 {p99 * 1000:.2f} ms"


def _remove_prefix(client: Any, prefix: str) -> None:
    """Delete every key under the scratch prefix (a cluster: on every primary)."""
    try:
        keys = list(client.scan_iter(match=f"{prefix}:*", count=500))
        if keys:
            for key in keys:
                client.delete(key)
    except redis.RedisError:
        pass  # nothing written, or nothing allowed: nothing to remove


def _acl_checks(client: Any) -> list[Check]:
    """The user's permissions against the documented minimal set (Redis 7+: ACL DRYRUN)."""
    user = _call(lambda: client.execute_command("ACL", "WHOAMI"))
    if isinstance(user, Exception):
        return [Check("permissions", "?", UNKNOWN, f"ACL WHOAMI refused: {user}")]
    user = _text(user)
    missing = []
    for command in WORKER_COMMANDS:
        args = command.split("|")
        if args[0] in ("evalsha", "evalsha_ro"):
            args += ["0" * 40, "0"]
        reply = _call(lambda args=args: client.execute_command("ACL", "DRYRUN", user, *args))
        if isinstance(reply, Exception):
            if "unknown subcommand" in str(reply).lower() or "syntax" in str(reply).lower():
                return [Check("permissions", user, UNKNOWN, "ACL DRYRUN needs Redis 7")]
            if "noperm" in str(reply).lower() or "permission" in str(reply).lower():
                return [Check("permissions", user, UNKNOWN, f"ACL DRYRUN refused: {reply}")]
            continue
        if _text(reply) != "OK":
            missing.append(command.upper())
    if missing:
        return [Check("permissions", user, PROBLEM, f"missing: {' '.join(missing)}")]
    everything = _call(lambda: client.execute_command("ACL", "DRYRUN", user, "FLUSHALL"))
    if _text(everything) == "OK":
        return [Check("permissions", user, WARN,
                      "more than needed (FLUSHALL too): see the minimal ACL in security.md")]  # fmt: skip
    return [Check("permissions", user, OK, "the documented minimal set")]


def crash_rows(facts: dict[str, Any]) -> list[CrashRow]:
    """The README's crash table against this server's settings."""
    config, replication = facts["config"], facts["replication"]
    aof, fsync = config["appendonly"], config["appendfsync"]
    policy = config["maxmemory-policy"]
    replicas = (
        int(replication.get("connected_slaves") or 0) if isinstance(replication, Mapping) else None
    )
    unknown_persistence = aof is None
    return [
        CrashRow("the agent's process dies", True, "the saver's own guarantee, anywhere"),
        CrashRow(
            "redis-server is killed and restarts",
            None if unknown_persistence else aof == "yes",
            "AOF is written before Redis replies" if aof == "yes" else "needs appendonly yes",
        ),
        CrashRow(
            "the machine under Redis loses power",
            None if unknown_persistence else aof == "yes" and fsync == "always",
            "appendfsync always"
            if aof == "yes" and fsync == "always"
            else "needs appendonly yes with appendfsync always (everysec: about a second lost)",
        ),
        CrashRow(
            "the Redis primary fails over to a replica",
            None if replicas is None else replicas > 0,
            f"with wait_for_replicas={replicas}" if replicas else "no replica to fail over to",
        ),
        CrashRow(
            "Redis loses keys to eviction",
            None if policy is None else eviction_hazard(policy, ttl=1) is None,
            f"maxmemory-policy {policy}" if policy else "CONFIG GET refused",
        ),
    ]


def _version(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(p) for p in text.split(".")[:2])
    except ValueError:
        return (0,)


def _text(value: Any) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)
