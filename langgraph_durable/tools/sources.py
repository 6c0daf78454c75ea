"""The checkpointer a migration reads from, opened from one string (``--from``).

Owns ``open_source``: what each kind of source string means, the optional packages they
need, and the errors they raise (``MigrationSourceError``, one line, password masked).
  * ``postgresql://...`` / ``postgres://...``: ``PostgresSaver.from_conn_string``
    (langgraph-checkpoint-postgres, the ``postgres`` extra). ``setup()`` is not called:
    a migration never runs the source's schema migrations.
  * ``sqlite:///path`` (SQLAlchemy's form: ``sqlite:////abs/path`` for an absolute
    path) or the path of an existing file: ``SqliteSaver`` (langgraph-checkpoint-sqlite,
    the ``sqlite`` extra) on a read-only connection, so a typo never creates a database
    and nothing is written to the source.
  * ``module:factory``: ``factory()`` returns a ``BaseCheckpointSaver`` or a context
    manager of one (``module`` is imported with the current directory on ``sys.path``,
    as uvicorn does); an attribute that is a saver already is used as it is.
A PostgreSQL or SQLite source reads its rows with ``serde.DataOnlySerializer``: a row
naming a type outside LangGraph's safe types (and ``allowed_types``) stops the migration
as damage instead of being constructed. A factory's saver keeps the serializer its
author gave it (their code runs anyway).
"""

from __future__ import annotations

import importlib
import os
import re
import sqlite3
import sys
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver

from langgraph_durable.core.errors import MigrationSourceError
from langgraph_durable.core.redact import redact, redact_url
from langgraph_durable.core.serde import AllowedTypes, DataOnlySerializer

__all__ = ["open_source"]

_FACTORY = re.compile(r"^(?P<module>[A-Za-z_][\w.]*):(?P<attr>[A-Za-z_][\w.]*)$")
_POSTGRES = ("postgresql://", "postgres://")
_SQLITE = "sqlite:///"


@contextmanager
def open_source(spec: str, allowed_types: AllowedTypes = ()) -> Iterator[BaseCheckpointSaver]:
    """The checkpointer ``spec`` names, open for the block (closed after it). A database
    source constructs only LangGraph's safe types and ``allowed_types`` from its rows.

    Raises:
        MigrationSourceError: ``spec`` is none of the forms above, its package is not
            installed, its file does not exist, its factory fails or returns no saver, or
            the database refuses the connection.
    """
    with ExitStack() as stack:
        if spec.startswith(_POSTGRES):
            saver = _enter(stack, _postgres(spec), spec)
            saver.serde = DataOnlySerializer(allowed_types)
        elif spec.startswith(_SQLITE) or _is_path(spec):
            saver = _sqlite(stack, spec.removeprefix(_SQLITE))
            saver.serde = DataOnlySerializer(allowed_types)
        elif match := _FACTORY.match(spec):
            saver = _factory(stack, match["module"], match["attr"])
        else:
            raise MigrationSourceError(
                f"unknown source {redact_url(spec)!r}: expected postgresql://..., "
                "sqlite:///path, the path of a SQLite file, or module:factory"
            )
        yield saver


def _is_path(spec: str) -> bool:
    """A file, or what looks like the path of one (so a typo says the file is missing)."""
    if "://" in spec or _FACTORY.match(spec):
        return os.path.isfile(spec)
    return os.path.isfile(spec) or "/" in spec or spec.endswith((".db", ".sqlite", ".sqlite3"))


def _postgres(url: str) -> Any:
    try:
        from langgraph.checkpoint.postgres import PostgresSaver
    except ImportError:
        raise _missing("PostgreSQL", "langgraph-checkpoint-postgres", "postgres") from None
    return PostgresSaver.from_conn_string(url)


def _sqlite(stack: ExitStack, path: str) -> BaseCheckpointSaver:
    try:
        from langgraph.checkpoint.sqlite import SqliteSaver
    except ImportError:
        raise _missing("SQLite", "langgraph-checkpoint-sqlite", "sqlite") from None
    if not os.path.isfile(path):
        raise MigrationSourceError(f"no SQLite file at {path!r}")
    try:  # read-only: the migration must not change (or create) the source
        uri = "file:" + os.path.abspath(path).replace("?", "%3f").replace("#", "%23")
        conn = sqlite3.connect(uri + "?mode=ro", uri=True, check_same_thread=False)
        stack.callback(conn.close)
        saver = SqliteSaver(conn)
        saver.setup()  # reads the schema; creates nothing in a database that has it
    except sqlite3.Error as exc:
        raise MigrationSourceError(f"cannot read SQLite file {path!r}: {exc}") from None
    return saver


def _factory(stack: ExitStack, module_name: str, attr: str) -> BaseCheckpointSaver:
    what = f"{module_name}:{attr}"
    if os.getcwd() not in sys.path:  # `module` may be the user's own, next to them
        sys.path.insert(0, os.getcwd())
    try:
        made: Any = importlib.import_module(module_name)
        for part in attr.split("."):
            made = getattr(made, part)
    except (ImportError, AttributeError) as exc:
        raise MigrationSourceError(f"cannot load source factory {what}: {exc}") from None
    if callable(made) and not isinstance(made, BaseCheckpointSaver):
        try:
            made = made()
        except Exception as exc:  # noqa: BLE001 - the user's code: say which, in one line
            raise MigrationSourceError(
                f"source factory {what} failed: {type(exc).__name__}: {exc}"
            ) from None
    return _enter(stack, made, what)


def _enter(stack: ExitStack, made: Any, what: str) -> BaseCheckpointSaver:
    """``made`` itself when it is a saver, else the saver it yields as a context manager."""
    if not isinstance(made, BaseCheckpointSaver) and hasattr(made, "__enter__"):
        try:
            made = stack.enter_context(made)
        except Exception as exc:  # noqa: BLE001 - a refused connection, a bad URL, no database
            message = " ".join(f"{type(exc).__name__}: {exc}".split())
            raise MigrationSourceError(
                f"cannot open source {redact_url(what)}: {redact(message, what)}"
            ) from None
    if not isinstance(made, BaseCheckpointSaver):
        raise MigrationSourceError(
            f"source {redact_url(what)} gave a {type(made).__name__}, not a "
            "BaseCheckpointSaver (or a context manager of one)"
        )
    return made


def _missing(kind: str, package: str, extra: str) -> MigrationSourceError:
    return MigrationSourceError(
        f"migrating from {kind} needs {package}: pip install 'langgraph-durable[{extra}]'"
    )
