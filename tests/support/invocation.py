"""Lambda code run in this process as Lambda runs it: handed a context that says how much
time the invocation has left, and, where asked, stopped when that time is up.

The Lambda code has no branch for being run outside Lambda: whatever reads the context
(a paged step, an injected crash that runs out the clock) reads this one. What Lambda's
runtime does at a timeout, stopping the invocation, is done here by ending the process,
which a test asks for only in a child process of its own (``stop_at_timeouts``).
"""

from __future__ import annotations

import os
import threading
import time

# How a child process that ran past an invocation's timeout ends (tests assert it).
TIMED_OUT_EXIT_CODE = 70

_stopping = threading.Event()


class InvocationContext:
    """The part of the Lambda context the handlers read: the time they have left."""

    def __init__(self, timeout_seconds: float):
        self._deadline = time.time() + timeout_seconds

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self._deadline - time.time()) * 1000))


def stop_at_timeouts() -> None:
    """From now on, end this process when an invocation runs past its timeout, as Lambda
    stops it: call it only in a child process that exists for that invocation."""
    _stopping.set()


def invoke(handler, event, timeout_seconds: float):
    """``handler(event, context)`` with a context of ``timeout_seconds``; past that time the
    process ends with TIMED_OUT_EXIT_CODE when ``stop_at_timeouts`` was called."""
    context = InvocationContext(timeout_seconds)
    if not _stopping.is_set():
        return handler(event, context)
    runtime = threading.Timer(timeout_seconds, os._exit, args=(TIMED_OUT_EXIT_CODE,))
    runtime.daemon = True
    runtime.start()
    try:
        return handler(event, context)
    finally:
        runtime.cancel()
