"""The saver core: every checkpointer operation as a pure plan, one concern per module.

Nothing here does I/O. Every operation is a generator (a *plan*, ``ops.py``) that yields
what it needs done and is sent the reply; the sync and async savers only drive plans
(``BaseRedisSaver.drive`` / ``adrive``), so each operation, its round trips and its
fallback logic exist exactly once. ``SaverCore`` only assembles the plan modules and
holds the settings they share; it has no state a plan changes, except two caches
(the newest versions per thread, the last recovery report per thread).

Where each concern lives:
  ``ops.py``          what a plan may yield
  ``reply_codes.py``  error replies and Lua codes -> typed errors (the one table)
  ``codec.py``        the record codec (seal, verify, decode) and the shared settings
  ``records.py``      decoded records and damage reasons
  ``reads.py``        the read steps every reading plan shares, quarantine, reindex
  ``fallback.py``     ``get_tuple``: the newest checkpoint that verifies, reported
  ``listing.py``      ``list``
  ``writes.py``       ``put``, ``put_writes``
  ``retention.py``    ``keep_last``, guarded deletions
  ``threads.py``      ``delete_thread``, ``copy_thread``, ``prune``, ``delete_for_runs``
  ``verify.py``       ``verify``
  ``delta.py``        ``get_delta_channel_history``
  ``fencing.py``      lease plans and the fencing token a write carries
  ``runs.py``         the run index ``delete_for_runs`` searches
  ``saved_here.py``   the checkpoints this process's runs saved (for the ledger)
"""

from __future__ import annotations

from langgraph.checkpoint.base import SerializerProtocol

from langgraph_durable.core import inputs
from langgraph_durable.core.compression import Compression
from langgraph_durable.core.delta import DeltaHistoryPlans
from langgraph_durable.core.elements import ElementCache, element_keys
from langgraph_durable.core.envelope import Envelope
from langgraph_durable.core.fallback import FallbackPlans
from langgraph_durable.core.fencing import FencingPlans
from langgraph_durable.core.keys import KeySchema
from langgraph_durable.core.listing import ListingPlans
from langgraph_durable.core.newest import NewestVersions
from langgraph_durable.core.recent import RecentFields
from langgraph_durable.core.reports import RecoveryReport
from langgraph_durable.core.runs import RunIndex
from langgraph_durable.core.threads import ThreadPlans
from langgraph_durable.core.verify import VerifyPlans
from langgraph_durable.core.writes import WritePlans


class SaverCore(
    WritePlans,
    ListingPlans,
    FallbackPlans,
    ThreadPlans,
    VerifyPlans,
    DeltaHistoryPlans,
    FencingPlans,
):
    """Plans for every checkpointer operation, shared by ``RedisSaver`` and ``AsyncRedisSaver``."""

    def __init__(
        self,
        *,
        serde: SerializerProtocol,
        keys: KeySchema,
        envelope: Envelope,
        ttl: int | None,
        keep_last: int | None = None,
        wait_for_replicas: int = 0,
        replica_timeout_ms: int = 1000,
        repair_on_read: bool = True,
        compression: Compression | None = None,
        refresh_on_read: bool = False,
        list_elements: bool = True,
        verify_elements_on_write: bool = False,
    ) -> None:
        self.serde = serde
        self.repair_on_read = repair_on_read
        self.refresh_on_read = refresh_on_read
        self.wait_for_replicas = wait_for_replicas
        self.replica_timeout_ms = replica_timeout_ms
        self.keep_last = keep_last
        self.newest_only = False  # shallow.py sets it
        self.keys = keys
        self.envelope = envelope
        self.ttl = ttl
        self.recovery_reports: dict[tuple[str, str], RecoveryReport] = {}
        self._newest_versions = NewestVersions()
        self._recent_fields = RecentFields()
        self.element_cache = ElementCache()
        self.element_keys = element_keys(envelope.signing_keys)
        self.list_elements = list_elements
        self.verify_elements_on_write = verify_elements_on_write
        self.run_index = RunIndex(keys, ttl)
        self.max_record_bytes = inputs.MAX_RECORD_BYTES  # Redis's proto-max-bulk-len
        self.compression = compression or Compression(None)
