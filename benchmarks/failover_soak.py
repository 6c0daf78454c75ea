"""The failover soak: primary failovers, partitions, replica lag and SIGKILLed workers
under running workers (not in CI: about 20 minutes).

    python benchmarks/failover_soak.py [--failovers 100] [--partitions 20] [--workers 3]
                                       [--replicas 1] [--wait 1] [--out benchmarks/soak.json]

A primary and ``--replicas`` replicas on loopback (the workers' ``wait_for_replicas`` is
``--wait``), each behind a fault proxy (``tests/helpers/
fault_proxy.py``) whose address it announces, and one sentinel that knows them by those
addresses: the workers, the sentinel and the replicas reach every node through its
proxy. Faults, one at a time, each once the workers went on after the one before:
  * a failover: the primary SIGKILLed; once the sentinel named another, it is started
    again (same port and data directory) as a replica of the new one;
  * a partition: the primary's proxy drops every byte, closing nothing (the workers, the
    sentinel and its replicas are cut off from it); once the sentinel promoted a
    replica, the partition heals and the sentinel turns the old primary into a replica
    (before the next fault: every node in sync, the sentinel's failover ended);
  * before some faults, replica lag: a replica SIGSTOPped for a moment;
  * every fifth fault, a worker SIGKILLed and started again (it resumes its thread).
Workers: ``soak_worker.py``. Verdicts, from the effect log and the workers' logs:
duplicates (an idempotency key with two effects), lost acknowledged writes (a thread a
worker saw finish whose saved state is not whole on the primary at the end), runs
killed by a raw error (anything but a langgraph-durable error reaching a worker), and
the time from each fault to every worker going on: the second step a worker started
after the fault (the first may have started before its put met the fault).
"""

from __future__ import annotations

import argparse
import json
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import redis

from langgraph_durable import RedisSaver
from tests.helpers.fault_proxy import FaultProxy
from tests.helpers.servers import Server, free_port, start_server

SERVICE = "mymaster"
ROOT = Path(__file__).resolve().parent.parent
PATIENCE = 180.0  # a safety net on every wait: each ends on its event


def wait_for(condition: Any, what: str) -> None:
    deadline = time.monotonic() + PATIENCE
    while not condition():
        if time.monotonic() > deadline:
            raise SystemExit(f"soak: gave up waiting until {what}")
        time.sleep(0.05)


class Node:
    """A redis-server behind its own fault proxy, announcing the proxy's address."""

    def __init__(self, root: Path, name: str, primary: Node | None) -> None:
        self.dir = root / name
        self.dir.mkdir()
        self.port = free_port()
        self.proxy = FaultProxy("127.0.0.1", self.port)
        self.server: Server | None = None
        self.start(primary)

    def start(self, primary: Node | None) -> None:
        options = ["--save", "", "--appendonly", "no", "--repl-diskless-sync-delay", "0"]
        options += ["--replica-announce-ip", "127.0.0.1"]
        options += ["--replica-announce-port", str(self.proxy.port)]
        if primary is not None:
            options += ["--replicaof", "127.0.0.1", str(primary.proxy.port)]
        self.server = start_server(str(self.dir), *options, port=self.port)

    def client(self) -> redis.Redis:
        return redis.Redis(port=self.port, socket_timeout=5)

    def role(self) -> str:
        try:
            return str(self.client().info("replication")["role"])
        except redis.RedisError:
            return "down"


class Soak:
    def __init__(self, args: argparse.Namespace, root: Path) -> None:
        self.args, self.root = args, root
        self.rng = random.Random(args.seed)
        primary = Node(root, "n0", None)
        self.nodes = [primary, *(Node(root, f"n{i + 1}", primary) for i in range(args.replicas))]
        self.sentinel_port = free_port()
        conf = root / "sentinel.conf"
        conf.write_text(
            f"port {self.sentinel_port}\nbind 127.0.0.1\ndir {root}\n"
            f"sentinel monitor {SERVICE} 127.0.0.1 {primary.proxy.port} 1\n"
            f"sentinel down-after-milliseconds {SERVICE} 2000\n"
            f"sentinel failover-timeout {SERVICE} 4000\n"
        )
        log = open(root / "sentinel.log", "ab")  # noqa: SIM115 - open for the run
        self.sentinel = subprocess.Popen(
            [self._binary(), str(conf), "--sentinel"], stdout=log, stderr=subprocess.STDOUT
        )
        wait_for(self._sees_every_replica, "the sentinel saw both replicas")
        self.url = f"redis+sentinel://127.0.0.1:{self.sentinel_port}/{SERVICE}"
        self.prefix = f"soak{self.rng.randrange(10**6)}"
        self.workers: dict[int, subprocess.Popen[str]] = {}
        self.faults: list[dict[str, Any]] = []

    @staticmethod
    def _binary() -> str:
        from langgraph_durable.tools.embedded import find_server_binary

        return find_server_binary()

    def _sentinel(self) -> redis.Redis:
        return redis.Redis(port=self.sentinel_port, socket_timeout=5)

    def _sees_every_replica(self) -> bool:
        found = self._sentinel().sentinel_slaves(SERVICE)
        return len([r for r in found if r.get("master-link-status") == "ok"]) == self.args.replicas

    def settled(self) -> bool:
        """The last fault is over: the sentinel's failover ended, every other node is a
        replica in sync with the primary it names, and it sees both replicas."""
        try:
            master = self._sentinel().sentinel_master(SERVICE)
            if "failover_in_progress" in str(master.get("flags", "")):
                return False
            primary = self.primary()
            for node in self.nodes:
                info = node.client().info("replication")
                if node is primary:
                    if info["role"] != "master":
                        return False
                elif (
                    info["role"] != "slave"
                    or info.get("master_link_status") != "up"
                    or int(info.get("master_port", 0)) != primary.proxy.port
                ):
                    return False
            return self._sees_every_replica()
        except (redis.RedisError, StopIteration):
            return False

    def primary(self) -> Node:
        port = int(self._sentinel().sentinel_get_master_addr_by_name(SERVICE)[1])
        return next(n for n in self.nodes if n.proxy.port == port)

    # -- workers ------------------------------------------------------------------------
    def start_worker(self, n: int) -> None:
        proc = subprocess.Popen(
            [sys.executable, str(ROOT / "benchmarks" / "soak_worker.py"), self.url,
             self.prefix, str(n), str(self.root), str(self.args.wait)],
            stdout=subprocess.PIPE, stderr=open(self.root / f"worker-{n}.err", "ab"),  # noqa: SIM115
            text=True, cwd=ROOT,
        )  # fmt: skip
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        self.workers[n] = proc

    def steps(self) -> list[tuple[int, float]]:
        found = []
        for n in self.workers:
            path = self.root / f"worker-{n}.log"
            for line in path.read_text().splitlines() if path.exists() else []:
                event = json.loads(line)
                if event["event"] == "step":
                    found.append((n, event["t"]))
        return found

    def went_on(self, since: float) -> float | None:
        """When every worker started its second step after ``since``, or None yet."""
        after: dict[int, list[float]] = {n: [] for n in self.workers}
        for n, t in self.steps():
            if t > since:
                after[n].append(t)
        if any(len(ts) < 2 for ts in after.values()):
            return None
        return max(sorted(ts)[1] for ts in after.values())

    # -- faults ---------------------------------------------------------------------------
    def lag(self) -> None:
        replica = self.rng.choice([n for n in self.nodes if n is not self.primary()])
        # with as many replicas as WAIT asks for, a lagging one holds writes back a while
        assert replica.server is not None
        replica.server.proc.send_signal(signal.SIGSTOP)
        time.sleep(self.rng.uniform(0.2, 1.5))  # a lagging replica, for a while
        replica.server.proc.send_signal(signal.SIGCONT)

    def failover(self) -> None:
        old = self.primary()
        assert old.server is not None
        old.server.proc.kill()
        old.server.proc.wait(timeout=PATIENCE)
        wait_for(lambda: self.primary() is not old, "the sentinel promoted a replica")
        old.start(self.primary())  # back as a replica of the new primary

    def partition(self) -> None:
        old = self.primary()
        old.proxy.partition()
        wait_for(lambda: self.primary() is not old, "the sentinel promoted a replica")
        old.proxy.heal()  # the sentinel turns it into a replica (``settled``, next fault)

    def kill_worker(self) -> None:
        n = self.rng.choice(list(self.workers))
        self.faults.append({"kind": "worker SIGKILLed", "at": time.time(), "worker": n})
        self.workers[n].kill()
        self.workers[n].wait(timeout=PATIENCE)
        self.start_worker(n)

    def run(self) -> dict[str, Any]:
        for n in range(self.args.workers):
            self.start_worker(n)
        plan = ["failover"] * self.args.failovers + ["partition"] * self.args.partitions
        self.rng.shuffle(plan)
        wait_for(lambda: self.went_on(0.0) is not None, "every worker ran")
        for i, kind in enumerate(plan):
            wait_for(self.settled, "the last failover ended and every replica is in sync")
            if self.rng.random() < 0.3:
                self.lag()
            if i % 5 == 4:
                self.kill_worker()
            at = time.time()
            getattr(self, kind)()
            wait_for(lambda at=at: self.went_on(at) is not None, f"the workers went on ({kind})")
            went = self.went_on(at)
            assert went is not None
            self.faults.append({"kind": kind, "at": at, "recovery_s": went - at})
            print(f"{i + 1}/{len(plan)} {kind}: went on after {went - at:.1f} s", flush=True)
        (self.root / "stop").touch()
        for proc in self.workers.values():
            proc.wait(timeout=PATIENCE)
        return self.verdict()

    def verdict(self) -> dict[str, Any]:
        effects = [json.loads(x) for x in (self.root / "effects").read_text().splitlines()]
        twice = {k: c for k, c in Counter(e["key"] for e in effects).items() if c > 1}
        events = [
            json.loads(line)
            for n in self.workers
            for line in (self.root / f"worker-{n}.log").read_text().splitlines()
        ]
        done = {e["thread"] for e in events if e["event"] == "done"}
        raw = [e["error"] for e in events if e["event"] == "raw_error"]
        durable = Counter(e["error"].split("(")[0] for e in events if e["event"] == "durable_error")
        lost = []
        with RedisSaver.from_conn_string(self.url, key_prefix=self.prefix) as saver:
            for thread in sorted(done):
                saved = saver.get_tuple({"configurable": {"thread_id": thread}})
                trail = saved.checkpoint["channel_values"].get("trail") if saved else None
                if trail != list(range(6)):
                    lost.append(thread)
        recovery = sorted(f["recovery_s"] for f in self.faults if "recovery_s" in f)
        by_kind = {
            kind: sorted(f["recovery_s"] for f in self.faults if f["kind"] == kind)
            for kind in ("failover", "partition")
        }
        return {
            "replicas": self.args.replicas,
            "wait_for_replicas": self.args.wait,
            "failovers": self.args.failovers,
            "partitions": self.args.partitions,
            "workers": self.args.workers,
            "threads_finished": len(done),
            "effects": len(effects),
            "duplicates": len(twice),
            "lost_acknowledged_threads": lost,
            "raw_errors": raw,
            "durable_errors": dict(durable),
            "recovery_s": {
                kind: _spread(values) for kind, values in [("all", recovery), *by_kind.items()]
            },
            "duplicated": [e for e in effects if e["key"] in twice],
            "faults": self.faults,  # kind, at (time.time()), recovery_s or the worker killed
        }

    def close(self) -> None:
        (self.root / "stop").touch()
        for proc in self.workers.values():
            if proc.poll() is None:
                proc.kill()
        self.sentinel.kill()
        for node in self.nodes:
            node.proxy.close()
            if node.server is not None and node.server.proc.poll() is None:
                node.server.proc.send_signal(signal.SIGCONT)
                node.server.stop()


def _spread(values: list[float]) -> dict[str, float]:
    if not values:
        return {}
    p99 = values[min(len(values) - 1, round(0.99 * (len(values) - 1)))]
    return {"p50": statistics.median(values), "p99": p99, "worst": values[-1], "n": len(values)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--failovers", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=20)
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--replicas", type=int, default=1)
    parser.add_argument("--wait", type=int, default=1, help="the workers' wait_for_replicas")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "soak.json"))
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="lgd-soak-"))
    soak = Soak(args, root)
    began = time.time()
    try:
        result = soak.run()
    finally:
        soak.close()
    result["seconds"] = round(time.time() - began)
    result["load_average_end"] = list(__import__("os").getloadavg())
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    ok = not (result["duplicates"] or result["lost_acknowledged_threads"] or result["raw_errors"])
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
