"""``langgraph_durable.serde``: the serializers (defined in ``core/serde.py``)."""

from langgraph_durable.core.serde import AllowedTypes, DataOnlySerializer, default_serde

__all__ = ["AllowedTypes", "DataOnlySerializer", "default_serde"]
