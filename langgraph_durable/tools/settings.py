"""Saver options read from the environment, shared by the CLI and the server factory.

Owns the variables' names and how each is parsed: ``LGD_SIGNING_KEY`` (comma-separated
keys, newest first), ``LGD_KEY_PREFIX``, ``LGD_TTL`` (seconds) and ``LGD_CLUSTER``. A
value that cannot be used is a ``ConfigurationError`` naming the variable; a signing
key is never echoed. ``REDIS_URL`` is read by ``embedded.resolve_url``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from langgraph_durable.core.errors import ConfigurationError
from langgraph_durable.core.keys import DEFAULT_KEY_PREFIX, KeySchema

SIGNING_KEY_ENV = "LGD_SIGNING_KEY"
KEY_PREFIX_ENV = "LGD_KEY_PREFIX"
TTL_ENV = "LGD_TTL"
CLUSTER_ENV = "LGD_CLUSTER"
MIN_KEY_BYTES = 16  # as the saver's Envelope requires
_TRUE, _FALSE = ("1", "true", "t", "yes", "y", "on"), ("", "0", "false", "f", "no", "n", "off")


def checked_keys(keys: Sequence[bytes], source: str) -> list[bytes]:
    """``keys`` if each is long enough to sign with; else a ``ConfigurationError`` naming
    the key's number and ``source`` (a flag, a file, a variable), never the key."""
    for number, key in enumerate(keys, 1):
        if len(key) < MIN_KEY_BYTES:
            raise ConfigurationError(
                f"key {number} from {source} is {len(key)} bytes; a signing key must be at "
                f"least {MIN_KEY_BYTES} bytes"
            )
    return list(keys)


def signing_keys(environ: Mapping[str, str]) -> list[bytes] | None:
    """The keys in ``LGD_SIGNING_KEY`` (comma-separated, newest first), or None."""
    keys = [k.strip().encode() for k in environ.get(SIGNING_KEY_ENV, "").split(",") if k.strip()]
    return checked_keys(keys, SIGNING_KEY_ENV) if keys else None


def saver_options(environ: Mapping[str, str]) -> dict[str, Any]:
    """``key_prefix``, ``ttl``, ``signing_key`` and ``cluster`` for ``from_conn_string``,
    from ``LGD_KEY_PREFIX`` (default ``lgd``), ``LGD_TTL`` (a positive integer of
    seconds; unset keeps threads until deleted), ``LGD_SIGNING_KEY`` and ``LGD_CLUSTER``.

    Raises:
        ConfigurationError: a variable holds a value the saver cannot use (it is named).
    """
    prefix = environ.get(KEY_PREFIX_ENV) or DEFAULT_KEY_PREFIX
    try:
        KeySchema(prefix)
    except ValueError as exc:
        raise ConfigurationError(f"{KEY_PREFIX_ENV}: {exc}") from None
    return {
        "key_prefix": prefix,
        "ttl": _ttl(environ.get(TTL_ENV, "").strip()),
        "signing_key": signing_keys(environ),
        "cluster": _flag(CLUSTER_ENV, environ.get(CLUSTER_ENV, "")),
    }


def _ttl(text: str) -> int | None:
    if not text:
        return None
    try:
        ttl = int(text)
    except ValueError:
        ttl = 0
    if ttl <= 0:
        raise ConfigurationError(f"{TTL_ENV} must be a positive integer of seconds, got {text!r}")
    return ttl


def _flag(name: str, text: str) -> bool:
    value = text.strip().lower()
    if value not in _TRUE + _FALSE:
        raise ConfigurationError(f"{name} must be 1/true/yes or 0/false/no, got {text!r}")
    return value in _TRUE
