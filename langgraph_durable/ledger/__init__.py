"""The tool-result ledger: a resumed graph never calls a side-effecting tool twice.

The public names; ``tool_ledger.py`` says how it works and where each part lives.
"""

from langgraph_durable.ledger.entries import (
    DAMAGED,
    DIVERGED,
    ERROR,
    INTENT,
    INTERRUPTED,
    POLICIES,
    RESULT,
    Divergence,
    DivergenceAnswer,
    EscalationAnswer,
    LedgerEntry,
    Policy,
)
from langgraph_durable.ledger.sites import idempotency_key
from langgraph_durable.ledger.tool_ledger import ToolLedger

__all__ = [
    "DAMAGED",
    "DIVERGED",
    "ERROR",
    "INTENT",
    "INTERRUPTED",
    "POLICIES",
    "RESULT",
    "Divergence",
    "DivergenceAnswer",
    "EscalationAnswer",
    "LedgerEntry",
    "Policy",
    "ToolLedger",
    "idempotency_key",
]
