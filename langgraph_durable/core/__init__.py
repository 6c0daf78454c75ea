"""The core tier: everything the saver knows about its storage, and no I/O.

Plans (generators) yield Redis operations (``ops.py``) and parse the replies; the
``io`` tier runs them. Nothing here imports redis or opens a connection
(``tests/unit/test_layout.py`` checks it), so every plan can be driven by hand with
scripted replies (``tests/unit/``).

Where to start: every plan is a function of the plan context (``context.py``: the
settings and caches plans share); ``saver_core.py`` is that context with one method per
operation, each handing it to the module that owns it. ``keys.py`` is the storage
layout; ``records.py``, ``envelope.py``, ``codec.py``, ``compression.py`` and
``elements.py`` turn values into sealed records and back; ``writes.py``, ``reads.py``,
``fallback.py``, ``listing.py``, ``values.py``, ``delta.py`` are the checkpoint plans
(``round_trips.py``: a write's round trip); ``retention.py``, ``threads.py``,
``runs.py`` delete and copy; ``verify.py``, ``repair.py``, ``resign.py``, ``heads.py``
check and re-seal; ``reply_codes.py`` is the one reply -> error table; ``errors.py``
every error.
"""
