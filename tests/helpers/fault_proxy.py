"""A TCP proxy on loopback in front of Redis that injects connection faults (test helper).

Arm one fault at a time; it hits the next bytes that pass in its direction ("up" is client
to server, "down" server to client), on whichever connection carries them:

    proxy.cut("up", after=500)    # forward 500 more bytes, then close both sides:
                                  # a command cut in the middle never runs
    proxy.cut("down", after=0)    # the command ran, its reply never arrives
    proxy.stall("down", 0.5)      # hold the next reply back for 0.5 s (past a timeout)
    proxy.cut_every("up", 6)      # cut a burst of bytes every 6 to 12 bursts, at a
                                  # random point inside it, until disarmed (a new
                                  # connection's first bursts are spared: see below)

And a partition, the network between client and server gone without a reset:

    proxy.partition()             # every byte either way dropped, no connection closed;
                                  # a new connection is accepted and gets nothing
    proxy.heal()                  # connections held by the partition are closed

And an endpoint that moved (a managed service's DNS name or VIP pointed elsewhere):

    proxy.move_to(host, port)     # new connections reach another server; open ones
                                  # still reach the old one

``faults`` counts the faults that fired, so a test can check it exercised something.
Cuts come after a bounded number of bursts, not drawn at random per burst: how many fire
then follows from the traffic alone. A new connection's first ``GRACE + every`` bursts
are never cut: a client retrying a command reconnects (redis-py's handshake is 4 bursts)
and resends it (a large argument goes as 3 bursts), so without it a retry longer than
the gap between cuts would be cut on every attempt and the client would give up.
"""

from __future__ import annotations

import random
import socket
import threading
import time
from dataclasses import dataclass

GRACE = 4  # bursts of a new connection never cut, besides `every` (see above)


@dataclass
class _Fault:
    direction: str
    kind: str  # "cut" | "stall"
    after: int = 0
    seconds: float = 0.0
    every: int = 0  # cut_every: the shortest gap between cuts, in bursts; 0 = fire once
    bursts: int = 0  # bursts until the next cut (cut_every)


class FaultProxy:
    def __init__(self, target_host: str, target_port: int, *, seed: int = 0) -> None:
        self.target = (target_host, target_port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._fault: _Fault | None = None
        self._rng = random.Random(seed)
        self._sockets: set[socket.socket] = set()
        self._closed = False
        self._partitioned = threading.Event()
        # held while a burst is checked against the partition and forwarded: partition()
        # returns only once no burst is on its way past it
        self._passing = threading.Lock()
        self._held: set[socket.socket] = set()  # connections made during the partition
        self.faults = 0
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    # -- arming ---------------------------------------------------------------------------
    def cut(self, direction: str, after: int = 0) -> None:
        self._arm(_Fault(direction, "cut", after=after))

    def stall(self, direction: str, seconds: float) -> None:
        self._arm(_Fault(direction, "stall", seconds=seconds))

    def cut_every(self, direction: str, every: int) -> None:
        assert every >= 2, "every burst cut would leave no command a way through"
        self._arm(_Fault(direction, "cut", every=every, bursts=every))

    def disarm(self) -> None:
        self._arm(None)

    def partition(self) -> None:
        """Drop every byte either way from now on, closing nothing (a black hole). On
        return no burst is being forwarded any more: every byte that got through was
        handed to the other side before."""
        self._partitioned.set()
        with self._passing:
            pass

    def heal(self) -> None:
        """End the partition; connections made during it are closed (they have no server
        side), the others carry bytes again."""
        self._partitioned.clear()
        with self._lock:
            held, self._held = self._held, set()
        for sock in held:
            _close(sock)

    def move_to(self, host: str, port: int) -> None:
        """Send new connections to ``host:port``; those already open keep their server."""
        self.target = (host, port)

    @property
    def armed(self) -> bool:
        return self._fault is not None

    def _arm(self, fault: _Fault | None) -> None:
        assert fault is None or fault.direction in ("up", "down")
        with self._lock:
            self._fault = fault

    # -- forwarding -----------------------------------------------------------------------
    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if self._partitioned.is_set():  # accepted, then nothing: a black hole
                with self._lock:
                    self._held.add(client)
                threading.Thread(target=self._drain, args=(client,), daemon=True).start()
                continue
            try:
                server = socket.create_connection(self.target)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._sockets |= {client, server}
            for src, dst, direction in ((client, server, "up"), (server, client, "down")):
                threading.Thread(
                    target=self._pump, args=(src, dst, direction, client, server), daemon=True
                ).start()

    def _pump(
        self,
        src: socket.socket,
        dst: socket.socket,
        direction: str,
        client: socket.socket,
        server: socket.socket,
    ) -> None:
        carried = 0  # bursts this connection carried in this direction
        try:
            while data := src.recv(65536):
                if self._partitioned.is_set():
                    continue  # dropped, the connection kept open
                carried += 1
                forward, cut, pause = self._decide(direction, data, carried)
                if pause:
                    time.sleep(pause)
                with self._passing:
                    if self._partitioned.is_set():
                        continue  # cut off while it waited: dropped
                    if forward:
                        dst.sendall(forward)
                if cut:
                    break
        except OSError:
            pass
        for sock in (client, server):  # either side gone, or a cut: the connection ends
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()
            with self._lock:
                self._sockets.discard(sock)

    def _drain(self, sock: socket.socket) -> None:
        """Read and drop what a connection made during the partition sends."""
        try:
            while sock.recv(65536):
                pass
        except OSError:
            pass

    def _decide(self, direction: str, data: bytes, carried: int) -> tuple[bytes, bool, float]:
        """What of ``data`` (the ``carried``-th burst of its connection in this direction)
        to forward, whether to cut after it, how long to hold it."""
        with self._lock:
            fault = self._fault
            if fault is None or fault.direction != direction:
                return data, False, 0.0
            if fault.kind == "stall":
                self._fault = None
                self.faults += 1
                return data, False, fault.seconds
            if fault.every:
                fault.bursts -= 1
                if fault.bursts > 0 or carried <= GRACE + fault.every:
                    return data, False, 0.0
                fault.bursts = fault.every + self._rng.randrange(fault.every + 1)
                self.faults += 1
                return data[: self._rng.randrange(len(data))], True, 0.0
            if fault.after >= len(data):
                fault.after -= len(data)
                return data, False, 0.0
            self._fault = None
            self.faults += 1
            return data[: fault.after], True, 0.0

    def close(self) -> None:
        self._closed = True
        self._listener.close()
        with self._lock:
            sockets = list(self._sockets)
        for sock in [*sockets, *self._held]:
            _close(sock)


def _close(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    sock.close()
