"""Ctrl-C during a long command: Terraform stops where it is safe, and the command says what it left.

A terminal sends Ctrl-C's SIGINT to its whole foreground process group: make, this Python
and every Terraform it runs (they share the group). Terraform handles it by itself: it stops
starting resources, lets the calls in flight end, writes its state and exits
("Interrupt received. Please wait for Terraform to exit or data loss may occur."; a second
Ctrl-C ends it at once). Python's default, a KeyboardInterrupt in the main thread, would
unwind past the subprocess and kill it mid-write. So a command line wraps its work in
``stopping_safely()``: a Ctrl-C is then only noted (``requested()``), every Terraform run
is read to its end, and the command stops before starting anything new and prints what
it left and what to run next.
"""

from __future__ import annotations

import signal
import threading
from contextlib import contextmanager

_requested = threading.Event()


class Interrupted(Exception):
    """The learner pressed Ctrl-C; the message says what was left and what to run next."""


def requested() -> bool:
    """Whether Ctrl-C was pressed since ``stopping_safely()`` began."""
    return _requested.is_set()


def check(what_next: str) -> None:
    """Stop here, before starting anything new, if Ctrl-C was pressed."""
    if requested():
        raise Interrupted(what_next)


@contextmanager
def stopping_safely():
    """Within it, SIGINT (Ctrl-C) sets a flag instead of raising KeyboardInterrupt. Main thread only."""
    _requested.clear()
    previous = signal.signal(signal.SIGINT, lambda *_: _requested.set())
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
