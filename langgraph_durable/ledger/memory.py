"""What this process remembers of the model answers it handed out (``journal.py``).

Owns two bounded maps, behind one lock, shared by every task of one ledger (and its
views on other savers, ``context.bound``):
  * (thread, tool-call id or AI message id) -> the journaled answer that held it: a
    tool call finds the answer its AI message came from (to settle it, and as a fact
    for ``executions.py``); a model request finds the answers it holds;
  * (thread, field) -> the task and node attempt that recorded an answer here:
    LangGraph runs an attempt again in the same process only after one raised.
A lost memory (another process, an eviction from the maps) only makes the journal
ask the model again, never replay: nothing here is a proof of anything.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

from langchain_core.messages import AIMessage

from langgraph_durable.ledger.entries import LedgerEntry

_KEPT = 10_000  # entries kept in each map
_MESSAGE = "\x00message:"  # answers are also remembered by their AI messages' ids


class AnswerMemory:
    """The answers this process handed out, by the tool calls and messages they held."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._answers: OrderedDict[tuple[str, str], LedgerEntry] = OrderedDict()
        self._recorded_by: OrderedDict[tuple[str, str], tuple[str | None, int]] = OrderedDict()

    def remember(self, thread_id: str, entry: LedgerEntry, attempt: int | None = None) -> None:
        """Keep ``entry``'s tool-call and message ids and, for an answer recorded by this
        process (``attempt``: its node attempt), who recorded it."""
        with self._lock:
            for call_id in tool_call_ids(entry.result):
                self._answers[(thread_id, call_id)] = entry
            for message in answer_messages(entry.result):
                if message.id:
                    self._answers[(thread_id, _MESSAGE + str(message.id))] = entry
            if attempt is not None:
                self._recorded_by[(thread_id, entry.field)] = (entry.task_id, attempt)
            for kept in (self._answers, self._recorded_by):
                while len(kept) > _KEPT:
                    kept.popitem(last=False)  # type: ignore[attr-defined]

    def settled(self, thread_id: str, entries: list[LedgerEntry]) -> None:
        """``entries`` (model answers) were just recorded as settled."""
        for entry in entries:
            self.remember(thread_id, entry)

    def answers_of(self, thread_id: str, call_ids: frozenset[str]) -> list[LedgerEntry]:
        """The journaled answers, handed out by this process, that held ``call_ids``."""
        with self._lock:
            found = {id(e): e for c in call_ids if (e := self._answers.get((thread_id, c)))}
        return list(found.values())

    def answers_in(self, thread_id: str, message_ids: tuple[str, ...]) -> list[LedgerEntry]:
        """The journaled answers, handed out by this process, whose AI messages these are."""
        return self.answers_of(thread_id, frozenset(_MESSAGE + m for m in message_ids))

    def raised_here(self, thread_id: str, field: str, task_id: str, attempt: int) -> bool:
        """Whether an earlier attempt of this task, in this process, recorded the answer
        at ``field``: LangGraph runs an attempt again only after one raised."""
        with self._lock:
            recorded = self._recorded_by.get((thread_id, field))
        return recorded is not None and recorded[0] == task_id and attempt > recorded[1]


def answer_messages(value: Any) -> list[Any]:
    """The AI messages of an answer: a message, or ``create_agent``'s stored response."""
    if isinstance(value, dict) and isinstance(value.get("result"), list):
        return [m for m in value["result"] if isinstance(m, AIMessage)]
    return [value] if isinstance(value, AIMessage) else []


def tool_call_ids(value: Any) -> list[str]:
    """The ids of the tool calls an answer's AI messages hold."""
    return [str(c["id"]) for m in answer_messages(value) for c in m.tool_calls if c.get("id")]
