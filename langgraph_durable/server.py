"""``checkpointer``: the factory ``langgraph.json`` names to serve graphs on langgraph-durable.

Owns the saver LangGraph Server (``langgraph dev``, ``langgraph up``) runs every graph
with, configured from the environment: ``REDIS_URL`` (else the embedded server, see
``embedded.py``) and ``LGD_KEY_PREFIX``, ``LGD_TTL``, ``LGD_SIGNING_KEY``,
``LGD_CLUSTER`` (``settings.py``). The server enters it once per event loop and calls
``aprune``, ``acopy_thread``, ``adelete_thread`` and ``adelete_for_runs`` on it; a
``ToolLedger()`` in a served graph finds it through the run's config.

``langgraph.json``::

    {"graphs": {"agent": "./agent.py:graph"},
     "checkpointer": {"path": "langgraph_durable.server.checkpointer"}}
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from langgraph_durable.aio import AsyncRedisSaver
from langgraph_durable.core.errors import ConfigurationError
from langgraph_durable.io.connect import check_url
from langgraph_durable.tools.embedded import resolve_url
from langgraph_durable.tools.settings import saver_options


@asynccontextmanager
async def checkpointer() -> AsyncIterator[AsyncRedisSaver]:
    """An ``AsyncRedisSaver`` configured from the environment, closed on exit.

    Raises:
        ConfigurationError: a variable holds a value the saver cannot use (named), or no
            ``REDIS_URL`` is set and no Redis server can be started.
    """
    options = saver_options(os.environ)  # bad settings fail before any I/O
    if os.environ.get("REDIS_URL"):
        try:
            check_url(os.environ["REDIS_URL"])
        except ConfigurationError as exc:
            raise ConfigurationError(f"REDIS_URL: {exc}") from None
    # Starting the embedded server blocks (a subprocess, then waiting for it to answer),
    # which LangGraph Server refuses on its event loop.
    url = await asyncio.to_thread(resolve_url)
    async with AsyncRedisSaver.from_conn_string(url, **options) as saver:
        yield saver
