"""OpenTelemetry's global tracer and meter providers, looked up at every operation cheaply.

``trace.get_tracer_provider()`` and ``metrics.get_meter_provider()`` answer "no provider
set yet" by looking their environment variable up in ``os.environ``, a KeyError raised
and caught each time: 1-5 µs per lookup, two per saver operation, on every put of an
application without an SDK. ``GlobalProvider`` reads the API module's own global first:
while it is unset, and the environment named no provider when the saver was made, the
answer is the API's proxy, as the getter's would be, without the lookup. Once the
application sets a provider (before or after the saver was made), the global is set and
the getter answers again. Not seen: an environment variable set after the saver was made
while no provider was ever set in code (OpenTelemetry's own instrumentations read it at
start-up too). Where a release of the API keeps its global elsewhere, the getter answers
every time, as before.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

_ABSENT = object()


class GlobalProvider:
    """The global provider ``getter`` returns; ``module.attribute`` is the API's global
    behind it (None until one is set), ``variable`` its environment variable."""

    def __init__(
        self, getter: Callable[[], Any], module: Any, attribute: str, variable: str
    ) -> None:
        self._getter = getter
        self._module, self._attribute = module, attribute
        self._from_environment = variable in os.environ
        self._unset: Any = None  # what the getter answers while none is set: its proxy

    def __call__(self) -> Any:
        if not self._from_environment and getattr(self._module, self._attribute, _ABSENT) is None:
            if self._unset is None:
                self._unset = self._getter()
            return self._unset
        return self._getter()


def tracer_provider() -> GlobalProvider:
    from opentelemetry import trace

    return GlobalProvider(
        trace.get_tracer_provider, trace, "_TRACER_PROVIDER", "OTEL_PYTHON_TRACER_PROVIDER"
    )


def meter_provider() -> GlobalProvider:
    from opentelemetry import metrics

    try:
        from opentelemetry.metrics import _internal as module
    except ImportError:  # pragma: no cover - a release that moved it: the getter answers
        module = None
    return GlobalProvider(
        metrics.get_meter_provider, module, "_METER_PROVIDER", "OTEL_PYTHON_METER_PROVIDER"
    )
