"""Which policy a call gets: ``policies=`` by name, else its tool's own hints, else the default.

Owns the reading of a tool's hints and the checking of policy options. A LangChain tool
carries them in ``BaseTool.metadata`` under the MCP ``ToolAnnotations`` names, which is
where langchain-mcp-adapters copies an MCP server's annotations (``readOnlyHint``,
``idempotentHint``, ``destructiveHint``, flat in ``metadata``). The mapping, from the
safest side:
  * ``readOnlyHint`` true (and ``destructiveHint`` not also true, a contradiction)
    -> ``"readonly"``: not recorded, simply called again on replay;
  * ``idempotentHint`` true -> ``"retry"``: an unknown outcome is retried with the same
    idempotency key (calling it again has no additional effect, destructive or not);
  * ``destructiveHint`` true otherwise -> ``"escalate"``: a human decides, whatever
    ``default_policy`` says;
  * anything else (no hints, hints that are not booleans) -> the ledger's
    ``default_policy``.
Only ``True`` counts: a hint is a claim by the tool's author or MCP server, so nothing
weaker than an explicit boolean relaxes the ledger's guard.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from langgraph_durable.core.errors import ConfigurationError
from langgraph_durable.ledger.entries import DIVERGENCES, POLICIES, Divergence, Policy

_HINTS = ("readOnlyHint", "idempotentHint", "destructiveHint")


def hinted_policy(tool: Any) -> Policy | None:
    """The policy ``tool``'s metadata hints give it, or None if they give none."""
    hints = _hints(getattr(tool, "metadata", None))
    if hints.get("readOnlyHint") is True and hints.get("destructiveHint") is not True:
        return "readonly"
    if hints.get("idempotentHint") is True:
        return "retry"
    if hints.get("destructiveHint") is True:
        return "escalate"
    return None


def _hints(metadata: Any) -> dict[str, Any]:
    if not isinstance(metadata, Mapping):
        return {}
    return {name: metadata.get(name) for name in _HINTS}


def check_policies(policies: Mapping[str, Any], default_policy: Any) -> None:
    """Raise ``ConfigurationError`` naming the first policy that is not one of POLICIES."""
    for name, policy in {**policies, "<default>": default_policy}.items():
        check_policy(policy, name)


def check_policy(policy: Any, name: str | None = None) -> None:
    if policy not in POLICIES:
        where = f" for {name!r}" if name is not None else ""
        raise ConfigurationError(f"unknown ledger policy {policy!r}{where}: use one of {POLICIES}")


def check_divergence(on_divergence: Any) -> Divergence:
    if on_divergence not in DIVERGENCES:
        raise ConfigurationError(
            f"on_divergence must be one of {DIVERGENCES} ('escalate', the default, asks a "
            f"human through interrupt()), got {on_divergence!r}"
        )
    return on_divergence  # type: ignore[no-any-return]
