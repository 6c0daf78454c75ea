"""The plan context: the settings and the caches every plan reads, in one plain object.

Owns what a saver's plans share and nothing else: the serializer, the key schema, the
integrity envelope, the ttl and retention settings, the replication and read settings,
and the caches plans consult and fill (the newest versions per thread, ``newest.py``;
the recently read blob fields, ``recent.py``; the verified elements, ``elements.py``;
the last recovery report per thread; the run index, ``runs.py``). Every plan is a
function of it (``ctx: PlanContext``, the first parameter); ``SaverCore``
(``saver_core.py``) is this context with one method per operation of the contract.

Set once when the saver is built; a plan never changes a setting, only fills the
caches. It imports no plan module: every plan module imports it.
"""

from __future__ import annotations

from langgraph.checkpoint.base import SerializerProtocol

from langgraph_durable.core import inputs
from langgraph_durable.core.compression import Compression
from langgraph_durable.core.elements import ElementCache, element_keys
from langgraph_durable.core.envelope import Envelope
from langgraph_durable.core.keys import KeySchema
from langgraph_durable.core.newest import NewestVersions
from langgraph_durable.core.recent import RecentFields
from langgraph_durable.core.reports import RecoveryReport
from langgraph_durable.core.runs import RunIndex
from langgraph_durable.core.split_memo import SplitMemo


class PlanContext:
    """The settings and caches of one saver's plans."""

    serde: SerializerProtocol
    keys: KeySchema
    envelope: Envelope
    ttl: int | None
    keep_last: int | None
    wait_for_replicas: int
    replica_timeout_ms: int
    repair_on_read: bool  # False: reads skip damage without moving it (they write nothing)
    refresh_on_read: bool  # True: a read gives the thread's keys their full ttl again
    newest_only: bool  # a shallow saver: one checkpoint per thread and namespace (shallow.py)
    list_elements: bool  # False: lists stored whole, as releases before elements did
    verify_elements_on_write: bool
    max_record_bytes: int
    compression: Compression
    element_keys: tuple[bytes, ...]
    # Caches: filled by plans, never a setting.
    recovery_reports: dict[tuple[str, str], RecoveryReport]
    newest_versions: NewestVersions
    recent_fields: RecentFields
    element_cache: ElementCache
    split_memo: SplitMemo
    run_index: RunIndex

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
        self.recovery_reports = {}
        self.newest_versions = NewestVersions()
        self.recent_fields = RecentFields()
        self.element_cache = ElementCache(by_bytes=verify_elements_on_write)
        self.split_memo = SplitMemo()
        self.element_keys = element_keys(envelope.signing_keys)
        self.list_elements = list_elements
        self.verify_elements_on_write = verify_elements_on_write
        self.run_index = RunIndex(keys, ttl)
        self.max_record_bytes = inputs.MAX_RECORD_BYTES  # Redis's proto-max-bulk-len
        self.compression = compression or Compression(None)

    @property
    def ttl_arg(self) -> int:
        """The ttl as the write scripts take it: seconds, 0 for none."""
        return int(self.ttl) if self.ttl else 0
