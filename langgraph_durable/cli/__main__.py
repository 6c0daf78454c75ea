"""``python -m langgraph_durable.cli``."""

from langgraph_durable.cli import main

main()
