"""``langgraph_durable.migration``: copying threads from another saver (defined in
``tools/migration.py``), under its public path."""

from langgraph_durable.tools.migration import *
from langgraph_durable.tools.migration import __all__  # noqa: F401
