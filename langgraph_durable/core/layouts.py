"""Compact layouts: the KEYS a write script's usual call passes.

Without a ttl (nothing to expire or persist) and without a repair, a write script's call
reaches only some of the thread's keys, and passes only those: each key costs Redis
~1,200 instructions a call (its Lua makes a string and a table slot of it, and grows the
table). A call with a ttl, and the resend with the twins a repair asks for
(``LGD_REPAIR``), pass ``ThreadKeys.for_writes()`` / ``with_twins()``. ``scripts.py``
assembles each script's variant ``<name>:compact`` with these positions.
"""

from __future__ import annotations

from operator import attrgetter

from langgraph_durable.core.keys import ThreadKeys

COMPACT = ":compact"  # the suffix of a compact variant's name, and Script.layout
COMPACT_LAYOUTS: dict[str, tuple[str, ...]] = {
    "put_checkpoint": ("cps", "cp", "bl", "el", "gen", "lease", "fence", "wr", "runs", "sub", "head"),
    "put_writes": ("cps", "wix", "wr", "el", "gen", "lease", "fence"),
}  # fmt: skip


_KEYS_OF = {script: attrgetter(*kinds) for script, kinds in COMPACT_LAYOUTS.items()}


def compact_keys(tk: ThreadKeys, script: str) -> list[str]:
    """KEYS of ``script``'s compact layout, in its order."""
    return list(_KEYS_OF[script](tk))
