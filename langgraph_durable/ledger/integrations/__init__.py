"""The ledger's integrations with LangGraph and LangChain, each a thin shell over the
ledger's plans and sequences, given the ledger context (``ledger/context.py``):

  * ``tool_calls.py``: ``ToolNode(wrap_tool_call=..., awrap_tool_call=...)`` and
    ``ledger.tool_node(tools)``;
  * ``durable.py``: ``@ledger.durable``, for calls inside ordinary nodes and Functional
    API tasks;
  * ``model.py``: ``ledger.model(chat_model)``, a journaled chat model;
  * ``middleware.py``: ``ledger.middleware()`` for ``create_agent``.
"""
