"""The element cache: the elements a process stored or verified, kept in memory.

Owns ``ElementCache`` (what ``elements.py`` splits into and reads from): elements by
digest and by content, the fingerprints a put checks stored elements against, the
entries of runs of blocks already opened (``blocks.py``), and the digests the manifest
records a read verified name (``values.py``). Bounded, emptied whole when full; safe
from any thread.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterable, Sequence
from itertools import filterfalse
from operator import itemgetter
from typing import Any

_LENGTH = itemgetter(0)  # of a fingerprint (length, digest + SHA-1)

MAX_FINGERPRINTS = 1 << 17  # about 30 MB of them at most
MAX_EXPANSIONS = 1024  # runs of blocks whose entries are kept (blocks.py)
MAX_MANIFESTS = 1024  # manifest records opened, with the digests they name (values.py)


class ElementCache:
    """Elements this process stored or verified, by digest (their serialized type and
    bytes, decompressed) and by content (their digest and stored form). An element never
    changes under its digest, so a read takes a cached one instead of reading and
    verifying it again, and a put does not compress or hash again an element it stored.
    Holds at most ``max_bytes`` of elements (crude: emptied whole when full, safe from
    any thread). ``by_bytes``: fingerprints carry the SHA-1 of the stored bytes, which
    only a put that checks elements by their bytes uses (``verify_elements_on_write``):
    else each element stored or read would be hashed once more for nothing."""

    def __init__(self, max_bytes: int = 32 << 20, *, by_bytes: bool = True) -> None:
        self.max_bytes = max_bytes
        self.by_bytes = by_bytes
        self._lock = threading.Lock()  # the size count; the dicts are safe on their own
        self._size = 0
        self._by_digest: dict[bytes, tuple[str, bytes]] = {}
        self._by_content: dict[bytes, tuple[bytes, bytes]] = {}
        # digest -> (length, SHA-1) of the bytes stored under it, for a put to check
        # them (``known_as_stored``): kept apart from the content, so emptying it keeps them.
        self._fingerprints: dict[bytes, tuple[int, bytes]] = {}
        # moves on whenever the fingerprints are emptied: what a put noted under one
        # generation is still there under it (``split_memo.py`` skips noting it again)
        self.fingerprints_generation = 0
        # (kind, block digests) -> the entries those blocks name (blocks.py): blocks
        # never change under their digests, so what they name is worked out once
        self.expansions: dict[tuple[str, tuple[bytes, ...]], Any] = {}
        # (thread, blob field, manifest record) -> the digests that record names, its
        # blocks expanded: the same bytes under the same field verified once and name the
        # same digests again, so a read of a value it read before opens nothing
        self.manifests: dict[tuple[str, str, bytes], Any] = {}

    def get(self, digest: bytes) -> tuple[str, bytes] | None:
        return self._by_digest.get(digest)

    def uncached(self, digests: Iterable[bytes]) -> list[bytes]:
        """Those of ``digests`` not cached, in order."""
        return list(filterfalse(self._by_digest.__contains__, digests))

    def contents(self) -> dict[bytes, tuple[str, bytes]]:
        """The elements cached now, by digest: a dict that only ever grows (``empty``
        replaces it), so what a read found in it stays there for the read."""
        return self._by_digest

    def get_all(self, digests: Sequence[bytes]) -> list[tuple[str, bytes]] | None:
        """Every one of ``digests``, in order, or None if any is not cached."""
        found = list(map(self._by_digest.get, digests))
        return None if None in found else found  # type: ignore[return-value]

    def empty(self) -> None:
        """Forget every element (what ``add`` does when full); fingerprints stay."""
        self._by_digest, self._by_content, self._size = {}, {}, 0
        self.expansions, self.manifests = {}, {}

    def remember_expansion(self, key: tuple[str, tuple[bytes, ...]], entries: Any) -> None:
        """Keep what a run of blocks names (at most ``MAX_EXPANSIONS`` runs; references
        to digests the cache holds anyway, 8 bytes each)."""
        if len(self.expansions) >= MAX_EXPANSIONS:
            self.expansions = {}
        self.expansions[key] = entries

    def remember_manifest(self, key: tuple[str, str, bytes], digests: Any) -> None:
        """Keep the digests a verified manifest record names (at most
        ``MAX_MANIFESTS`` records)."""
        if len(self.manifests) >= MAX_MANIFESTS:
            self.manifests = {}
        self.manifests[key] = digests

    def note_stored(self, digest: bytes, stored: bytes) -> None:
        """Remember the bytes stored under ``digest`` by their length and SHA-1
        (``known_as_stored``), once this process wrote them or verified them."""
        if digest not in self._fingerprints:
            if len(self._fingerprints) >= MAX_FINGERPRINTS:
                self.forget_fingerprints()
            sha1 = hashlib.sha1(stored).hexdigest()[:15].encode() if self.by_bytes else b""
            self._fingerprints[digest] = (len(stored), digest + sha1)

    def forget_fingerprints(self) -> None:
        """Empty the fingerprints (what ``note_stored`` does when they are full). The
        generation moves on only once they are emptied: a put that read it before noted
        into the old ones and sees it moved (``split_memo.py``); one that read it after
        notes into the new. Under the lock, so two resets at once move it twice."""
        with self._lock:
            self._fingerprints = {}
            self.fingerprints_generation += 1

    def known_as_stored(self, digest: bytes) -> tuple[int, bytes] | None:
        """The length of the bytes stored under ``digest`` and the digest followed by
        the first 15 hex digits of their SHA-1 (what Redis's Lua can compute; the digest
        alone without ``by_bytes``), or None if this process never wrote nor verified
        them."""
        return self._fingerprints.get(digest)

    def lengths(self, digests: Sequence[bytes]) -> list[int | None]:
        """The length ``known_as_stored`` knows of each of ``digests``, None where it knows
        none (a put's window: in one call, in C when it knows them all)."""
        found = list(map(self._fingerprints.get, digests))
        if None not in found:
            return list(map(_LENGTH, found))
        return [k[0] if k is not None else None for k in found]

    def by_content(self, plain: bytes) -> tuple[bytes, bytes] | None:
        return self._by_content.get(plain)

    def add(
        self, digest: bytes, type_: str, data: bytes, plain: bytes | None, packed: bytes | None
    ) -> tuple[bytes, bytes | None]:
        """Keep the element; returns the (digest, stored form) its content is known by:
        one another thread registered first wins, so two writes of one content at once
        (a task's ``put_writes`` and the checkpoint's ``put``) store one ciphertext, not
        two."""
        size = len(data) + len(plain or b"")
        size += len(packed) if packed is not None and packed is not plain else 0
        if size > self.max_bytes:
            return digest, packed
        with self._lock:
            if plain is not None and (first := self._by_content.get(plain)) is not None:
                return first
            if self._size + size > self.max_bytes:
                self.empty()
            self._by_digest[digest] = (type_, data)
            if plain is not None and packed is not None:
                self._by_content[plain] = (digest, packed)
            self._size += size
        return digest, packed
