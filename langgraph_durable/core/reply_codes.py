"""Error replies: the one table from what Redis or a Lua script answered to what it means.

Owns every reading of an error reply. Rules it keeps:
  * No plan or shell looks inside an error's text; it asks here (``is_wrong_type``,
    ``needs_repair``, ``typed``), so each reply code is parsed in exactly one place.
  * ``TYPED_ERRORS`` is the table: a Lua code our scripts raise -> the typed error of
    ``errors.py`` it becomes. A code not in the table is Redis's own (out of memory, a
    read-only replica, ACL): the error is passed on as redis-py raised it.
  * Two codes are not errors for the caller but instructions for the code that sent the
    call: ``LGD_REPAIR`` (a write script met a key of the wrong type: send it again with
    the damaged twins to move it to; ``writes.py``) and ``NOSCRIPT`` (Redis lost the
    scripts: load them and resend; ``io/driver.py`` handles it, redis-py's own exception
    type). ``WRONGTYPE`` on a plain read is damage read as empty (``records.py``).
No I/O; knows the key schema only to name the thread and checkpoint in an error.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from langgraph_durable.core.errors import CheckpointLostError, LeaseHeldError, LeaseLostError
from langgraph_durable.core.keys import KeySchema
from langgraph_durable.core.ops import Batch, Script

LEASED = "LGD_LEASED"  # "<holder> <ms left>": another worker holds the thread's lease
FENCED = "LGD_FENCED"  # "<token> <newest|none>": this writer's token is not the newest
LOST = "LGD_LOST"  # "checkpoint", "value <argv index>" or "element": put_checkpoint's
# parent, a value it passes on or an element it names is gone
REPAIR = "LGD_REPAIR"  # a key of the wrong type: resend with the twins to move it to
WRONGTYPE = "WRONGTYPE"  # Redis: a command met a key of another type (damage)


def _lease_held(keys: KeySchema, op: Script, thread_id: str, detail: str) -> Exception:
    holder, _, ms_left = detail.rpartition(" ")
    return LeaseHeldError(
        thread_id=thread_id, holder=holder, expires_in=max(int(ms_left), 0) / 1000
    )


def _lease_lost(keys: KeySchema, op: Script, thread_id: str, detail: str) -> Exception:
    token, _, newest = detail.partition(" ")
    return LeaseLostError(
        thread_id=thread_id, token=token, newest=None if newest == "none" else newest
    )


def _checkpoint_lost(keys: KeySchema, op: Script, thread_id: str, detail: str) -> Exception:
    # put_checkpoint's ARGV[8], the parent; without one, ARGV[3], the checkpoint itself
    ns, parent_id = keys.parse_checkpoint_member(op.args[7] or op.args[2])
    missing = "the checkpoint's record is not there"
    if detail.startswith("value "):
        _, channel, version = keys.parse_blob_field(op.args[int(detail[6:]) - 1])
        missing = f"the value of channel {channel!r}@{version} it passes on is missing"
    elif detail.startswith("element"):
        missing = "the elements of the message lists it passes on are missing"
    return CheckpointLostError(
        thread_id=thread_id,
        checkpoint_ns=ns,
        parent_checkpoint_id=parent_id if op.args[7] else None,
        missing=missing,
        checkpoint_id=None if op.args[7] else parent_id,
    )


# Lua code -> builder of the typed error (args: the key schema, the refused script call,
# the thread it was for, the rest of the error text).
TYPED_ERRORS: dict[str, Callable[[KeySchema, Script, str, str], Exception]] = {
    LEASED: _lease_held,
    FENCED: _lease_lost,
    LOST: _checkpoint_lost,
}


def code(reply: Any) -> str | None:
    """The code of an error reply (its first word), or None for a reply that is no error."""
    return str(reply).partition(" ")[0] if isinstance(reply, Exception) else None


def is_wrong_type(reply: Any) -> bool:
    """An error reply saying a key holds another type (damage); raised through a script,
    Redis's text carries the script's name first, so the code is searched for."""
    return isinstance(reply, Exception) and WRONGTYPE in str(reply)


# Redis refusing the client itself (no password, a wrong one, an ACL without the command).
AUTH_REFUSALS = ("NOAUTH", "WRONGPASS", "NOPERM")


def is_auth_refusal(reply: Any) -> bool:
    return code(reply) in AUTH_REFUSALS


def needs_repair(reply: Any) -> bool:
    return code(reply) == REPAIR


def lost_element(reply: Any) -> bool:
    """put_checkpoint's refusal: an element the checkpoint names is not there."""
    return code(reply) == LOST and str(reply).startswith(LOST + " element")


def lost_value(reply: Any) -> bool:
    """put_checkpoint's refusal: a value the parent passes on is missing."""
    return code(reply) == LOST and str(reply).startswith(LOST + " value ")


def typed(keys: KeySchema, op: Script, exc: Exception) -> Exception:
    """The typed error for a script call refused with one of our codes, else ``exc``."""
    reply_code, _, detail = str(exc).partition(" ")
    build = TYPED_ERRORS.get(reply_code)
    if build is None:
        return exc
    thread_id = (keys.thread_id_from_key(op.keys[0]) if op.keys else None) or "?"
    return build(keys, op, thread_id, detail)


def first_error(keys: KeySchema, op: Batch, replies: Sequence[Any]) -> Exception | None:
    """The first error among a batch's replies, typed as ``typed`` does."""
    for command, reply in zip(op.commands, replies):
        if isinstance(reply, Exception):
            return typed(keys, command, reply) if isinstance(command, Script) else reply
    return None
