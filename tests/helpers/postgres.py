"""A PostgreSQL database of a test's own on the machine's server, dropped after."""

from __future__ import annotations

import socket
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

PG_HOST, PG_PORT = "127.0.0.1", 5432


@contextmanager
def own_database(name_prefix: str) -> Iterator[str]:
    """The URL of a new database; the test is skipped when no server answers."""
    psycopg = pytest.importorskip("psycopg")
    try:
        socket.create_connection((PG_HOST, PG_PORT), timeout=2).close()
    except OSError:
        pytest.skip(f"no PostgreSQL server answers on {PG_HOST}:{PG_PORT}")
    admin = f"postgresql://postgres@{PG_HOST}:{PG_PORT}/postgres"
    name = f"{name_prefix}_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield f"postgresql://postgres@{PG_HOST}:{PG_PORT}/{name}"
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
