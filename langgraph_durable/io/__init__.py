"""The I/O tier: runs the core's plans against Redis.

``driver.py`` is the one driver: it maps each operation to redis-py calls and holds the
sync and asyncio loops every round trip passes through; ``wire.py`` talks the protocol for
the hot paths; ``scripts.py`` loads the Lua scripts in ``lua/``; ``connect.py`` builds
clients (URLs, Sentinel, Cluster, TLS); ``compat.py`` settles what the server offers;
``hazards.py`` warns about server settings that lose data; ``failover.py`` retries round
trips across a failover.
"""
