"""Credentials out of anything printed: Redis URLs with their password masked."""

from __future__ import annotations

import re
from urllib.parse import unquote, urlsplit

# scheme://[user]:password@  ->  scheme://[user]:***@  (to the last "@", as urlsplit does)
_USERINFO = re.compile(r"(?P<head>[A-Za-z][A-Za-z0-9+.-]*://[^/@\s:]*:)\S*@")


def redact_url(url: str) -> str:
    """``url`` with its password replaced by ``***`` (``redis://user:***@host:6379/0``)."""
    return _USERINFO.sub(r"\g<head>***@", url)


def redact(text: str, url: str | None = None) -> str:
    """``text`` with the password of ``url`` (raw or percent-decoded) and of any URL it
    contains replaced by ``***``."""
    if url:
        try:
            password = urlsplit(url).password
        except ValueError:  # an unparseable URL: mask what the pattern finds
            password = None
        for secret in {password, unquote(password)} if password else ():
            text = text.replace(secret, "***")
    return redact_url(text)
