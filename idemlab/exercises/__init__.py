"""Exercises for the notebooks: each has ``check()``, ``hint()`` and ``solution()``.

A notebook cell does ``ex.check(learner_function)``; CI checks the answer key both
ways: the solution must pass, the naive code must fail.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, Callable


class ExerciseFailed(AssertionError):
    """The learner's code does not yet do what the exercise asks."""


@dataclass
class Exercise:
    title: str
    hint_text: str
    solution_fn: Callable[..., Any]
    # Runs the learner's callable against the backend and raises ExerciseFailed with a
    # message that says what went wrong (never just "wrong").
    verify: Callable[[Callable[..., Any]], str]

    def check(self, candidate: Callable[..., Any]) -> str:
        verdict = self.verify(candidate)
        print(f"Correct: {verdict}")
        return verdict

    def hint(self) -> None:
        print(self.hint_text)

    def solution(self) -> None:
        print(inspect.getsource(self.solution_fn))
