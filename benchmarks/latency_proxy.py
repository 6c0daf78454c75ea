"""A TCP proxy that holds every burst of bytes back for a fixed time in each direction:
Redis as if it were across a network (another zone: ~0.5-1 ms per round trip) instead
of on loopback.

    python benchmarks/latency_proxy.py TARGET_HOST TARGET_PORT DELAY_MS

Prints the port it listens on, then serves until killed. Half the delay is added on the
way in and half on the way out. A thread per direction per connection reads a burst,
sleeps, forwards it: exact for request/reply traffic (one command or pipeline in flight
per connection, as redis-py sends them). Run in its own process, so it does not take the
GIL of the process under test; it does take CPU, which the figures include.
"""

from __future__ import annotations

import socket
import sys
import threading
import time


def pump(src: socket.socket, dst: socket.socket, delay: float) -> None:
    try:
        while data := src.recv(1 << 16):
            time.sleep(delay)
            dst.sendall(data)
    except OSError:
        pass
    finally:
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def serve(host: str, port: int, delay: float) -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    print(listener.getsockname()[1], flush=True)
    while True:
        client, _ = listener.accept()
        server = socket.create_connection((host, port))
        for s in (client, server):
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        threading.Thread(target=pump, args=(client, server, delay / 2), daemon=True).start()
        threading.Thread(target=pump, args=(server, client, delay / 2), daemon=True).start()


if __name__ == "__main__":
    serve(sys.argv[1], int(sys.argv[2]), float(sys.argv[3]) / 1000)
