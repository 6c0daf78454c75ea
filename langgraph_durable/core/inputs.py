"""Checks on what callers hand the saver, made before anything is sent to Redis.

Owns: the types of the config fields (``thread_id``, ``checkpoint_ns``,
``checkpoint_id``) and of the names that become parts of keys, fields and index members
(channels, task ids, task paths, checkpoint ids); that those names are valid Unicode
(a lone surrogate such as ``"\\ud800"`` has no UTF-8 form, so redis-py would fail on it
deep inside); and the size limit of one stored record (Redis's ``proto-max-bulk-len``).
Each failure is a typed error (``errors.py``) that names the field or value at fault.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from langgraph_durable.core.errors import InvalidConfigError, ValueTooLargeError

# Redis refuses a bulk string (one key, field or value) longer than proto-max-bulk-len:
# 512 MB unless the server's configuration says otherwise.
MAX_RECORD_BYTES = 512 * 1024 * 1024


def text(value: Any, what: str) -> str:
    """``value`` if it is a str Redis can store (UTF-8 encodable), else InvalidConfigError
    naming ``what``."""
    if type(value) is str and value.isascii():  # the common case: one scan, no copy
        return value
    if not isinstance(value, str):
        raise InvalidConfigError(f"{what} must be a str, got {type(value).__name__} {value!r}")
    if not value.isascii():
        try:
            value.encode()
        except UnicodeEncodeError as exc:
            raise InvalidConfigError(
                f"{what} must be valid Unicode, but {value!r} holds the lone surrogate "
                f"{value[exc.start : exc.end]!r} at position {exc.start}, which has no UTF-8 "
                "form and cannot be stored in Redis (decode the bytes it came from with "
                "errors='replace')"
            ) from None
    return value


def all_ascii_text(values: Iterable[Any]) -> bool:
    """Whether every one of ``values`` is plain ASCII text (what ``text`` passes at once),
    told in C."""
    try:  # join refuses anything but text
        return "".join(values).isascii()
    except TypeError:
        return False


def thread(value: Any) -> str:
    """The thread id as stored: a str, or an int as its decimal text."""
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if not isinstance(value, str):
        raise InvalidConfigError(
            f"thread_id must be a str (or int), got {type(value).__name__} {value!r}"
        )
    return text(value, "thread_id")


def configurable(config: Any, *, any_namespace: bool = False) -> Mapping[str, Any]:
    """``config['configurable']`` once its fields are checked: a ``thread_id``; a
    ``checkpoint_ns`` that is a str when present (``None`` too with ``any_namespace``,
    where it means every namespace); a ``checkpoint_id`` that is a str or None."""
    if type(config) is dict:  # as LangGraph passes it; isinstance of an ABC costs more
        conf = config.get("configurable")
        if type(conf) is dict:  # the usual call: plain ASCII text throughout, told in C
            checkpoint_id = conf.get("checkpoint_id")
            parts = (
                conf.get("thread_id"),
                conf.get("checkpoint_ns", ""),
                "" if checkpoint_id is None else checkpoint_id,
            )
            if all_ascii_text(parts):  # else checked one by one below, to say which is not
                return conf
    else:
        conf = (
            (config or {}).get("configurable")
            if isinstance(config, (Mapping, type(None)))
            else None
        )
    if not (type(conf) is dict or isinstance(conf, Mapping)) or "thread_id" not in conf:
        raise InvalidConfigError("config['configurable']['thread_id'] is required")
    thread(conf["thread_id"])
    if "checkpoint_ns" in conf and not (any_namespace and conf["checkpoint_ns"] is None):
        text(conf["checkpoint_ns"], "config['configurable']['checkpoint_ns']")
    optional_id(conf.get("checkpoint_id"), "config['configurable']['checkpoint_id']")
    return conf


def list_options(filter: Any, before: Any, limit: Any) -> str | None:
    """Check ``list()``'s options; returns the checkpoint id of ``before``, if any."""
    if filter is not None and not isinstance(filter, Mapping):
        raise InvalidConfigError(
            f"list(filter=...) must be a dict of metadata keys to values, got "
            f"{type(filter).__name__} {filter!r}"
        )
    if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool)):
        raise InvalidConfigError(
            f"list(limit=...) must be an int, got {type(limit).__name__} {limit!r}"
        )
    if before is None or (isinstance(before, Mapping) and not before):
        return None
    conf = before.get("configurable") if isinstance(before, Mapping) else None
    if not isinstance(conf, Mapping):
        raise InvalidConfigError(
            f"list(before=...) must be a config with a 'configurable' dict, got "
            f"{type(before).__name__} {before!r}"
        )
    return optional_id(conf.get("checkpoint_id"), "before['configurable']['checkpoint_id']")


def optional_id(value: Any, what: str) -> str | None:
    """A checkpoint id that may be absent (None or empty)."""
    return None if value is None else text(value, what)


def record_size(size: int, *, thread_id: str, what: str, limit: int = MAX_RECORD_BYTES) -> None:
    """Raise ValueTooLargeError if a record of ``size`` bytes is over ``limit``."""
    if size > limit:
        raise ValueTooLargeError(thread_id=thread_id, what=what, size=size, limit=limit)
