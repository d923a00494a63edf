"""The steps one invocation took, with wall-clock times and its process id.

Every handler returns its trace, so the notebook can lay concurrent invocations on
one time axis and show where their check, charge and record overlap.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager

CHECK = "check"  # look for an earlier result of this idempotency key
CHARGE = "charge"  # call the card processor: the side effect
RECORD = "record"  # remember the key and the result
STEPS = (CHECK, CHARGE, RECORD)


class Trace:
    def __init__(self) -> None:
        self._open: dict[str, float] = {}
        self.steps: list[dict] = []

    def begin(self, name: str) -> None:
        self._open[name] = time.time()

    def end(self, name: str) -> None:
        started = self._open.pop(name, None)
        if started is not None:
            self.steps.append({"step": name, "start": started, "end": time.time(), "pid": os.getpid()})

    def is_open(self, name: str) -> bool:
        return name in self._open

    @contextmanager
    def step(self, name: str) -> Iterator[None]:
        self.begin(name)
        try:
            yield
        finally:
            self.end(name)
