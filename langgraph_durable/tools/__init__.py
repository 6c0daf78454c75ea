"""Operator and try-out tools beside the saver: ``migration.py`` copies threads from
another saver (``sources.py`` opens SQLite, PostgreSQL and in-memory sources as data
only), ``embedded.py`` starts a local Redis for trying things out, ``settings.py`` reads
the LangGraph Server factory's environment."""
