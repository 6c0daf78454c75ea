"""Walking a generator of steps: the part every shell loop shares.

Owns how a shell steps through a plan, a call sequence or a lease's renewal: each step
answered with a reply (sent in) or an error (thrown in) before the next, and the
generator's return value kept once it returned. A shell is then only what it does with
each kind of step, from sync code or from async code (``io/driver.py``,
``ledger/sequences.py``, ``lease.py``): one sync and one async loop each, with nothing
else written twice.
"""

from __future__ import annotations

from collections.abc import Generator, Iterator
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class Walk(Generic[T]):
    """The steps of ``steps``; set ``reply`` or ``error`` to answer each before the next.
    ``result`` is what ``steps`` returned, once the iteration ended."""

    def __init__(self, steps: Generator[Any, Any, T]) -> None:
        self.steps = steps
        self.reply: Any = None
        self.error: BaseException | None = None
        self.result: T

    def __iter__(self) -> Iterator[Any]:
        while True:
            try:
                if self.error is None:
                    step = self.steps.send(self.reply)
                else:
                    step = self.steps.throw(self.error)
            except StopIteration as stop:
                self.result = stop.value
                return
            self.reply, self.error = None, None
            yield step
