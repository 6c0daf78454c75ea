"""Credentials out of anything printed: Redis URLs with their password masked."""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, unquote, urlsplit

# scheme://[user]:password@  ->  scheme://[user]:***@  (to the last "@", as urlsplit does)
_USERINFO = re.compile(r"(?P<head>[A-Za-z][A-Za-z0-9+.-]*://[^/@\s:]*:)\S*@")


# ...?password=secret&...  ->  ...?password=***&...  (redis-py reads it from the query too)
_QUERY_PASSWORD = re.compile(r"(?P<head>[?&]password=)[^&\s]*", re.IGNORECASE)


def redact_url(url: str) -> str:
    """``url`` with its password replaced by ``***`` (``redis://user:***@host:6379/0``),
    in its userinfo or in a ``password=`` query parameter."""
    return _QUERY_PASSWORD.sub(r"\g<head>***", _USERINFO.sub(r"\g<head>***@", url))


def redact(text: str, url: str | None = None) -> str:
    """``text`` with the password of ``url`` (raw or percent-decoded) and of any URL it
    contains replaced by ``***``."""
    if url:
        try:
            parts = urlsplit(url)
            password = parts.password or next(
                (v for k, v in parse_qsl(parts.query) if k.lower() == "password"), None
            )
        except ValueError:  # an unparseable URL: mask what the pattern finds
            password = None
        for secret in {password, unquote(password)} if password else ():
            text = text.replace(secret, "***")
    return redact_url(text)
