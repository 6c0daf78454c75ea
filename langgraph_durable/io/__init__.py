"""The I/O tier: runs the core's plans against Redis.

``shell.py`` maps each operation to a redis-py call and holds the loops that drive a plan
(sync in ``saver.py``, async in ``aio.py`` for now); ``wire.py`` talks the protocol for
the hot paths; ``scripts.py`` loads the Lua scripts in ``lua/``; ``connect.py`` builds
clients (URLs, Sentinel, Cluster, TLS); ``compat.py`` settles what the server offers;
``hazards.py`` warns about server settings that lose data; ``failover.py`` retries round
trips across a failover.
"""
