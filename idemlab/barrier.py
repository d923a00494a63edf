"""Run calls at the same moment: each in its own thread, all released by one barrier.

The races of the lessons and their tests (two workers claiming one request, a cancel and
a claim, duplicate deliveries) use this one helper, so "at the same moment" means the
same thing everywhere.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any


def all_at_once(calls: list[Callable[[], Any]], join_seconds: float | None = 60, capture_errors: bool = False) -> list:
    """Each call's answer, in the order of ``calls``.

    An exception a call raises is re-raised here (the first one, in call order), or with
    ``capture_errors`` returned in that call's place: a check that reports what a
    learner's code did wants it as an outcome. A call still running after
    ``join_seconds`` leaves None in its place.
    """
    answers: list[Any] = [None] * len(calls)
    start_line = threading.Barrier(len(calls))

    def one(index: int) -> None:
        start_line.wait()
        try:
            answers[index] = calls[index]()
        except Exception as exc:  # handed to the caller's thread below
            answers[index] = exc

    threads = [threading.Thread(target=one, args=(i,), daemon=True) for i in range(len(calls))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=join_seconds)
    failed = [answer for answer in answers if isinstance(answer, Exception)]
    if failed and not capture_errors:
        raise failed[0]
    return answers


# Each call's answer or the exception it raised, waiting for every call to end.
settled = functools.partial(all_at_once, join_seconds=None, capture_errors=True)
