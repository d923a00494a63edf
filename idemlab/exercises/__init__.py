"""Exercises for the notebooks: each has ``check()``, ``hint()`` and ``solution()``.

A notebook cell does ``ex = exercises.exercise(stack)``, then ``ex.check(learner_function)``; CI
checks the answer key both ways: the solution must pass, the notebook's starting point must
fail (tests/support/notebook_cells.py).
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable
from typing import Any

from idemlab.barrier import settled
from idemlab.lessons import table  # noqa: F401 (the exercises' Tables, one per thread)

# Simultaneous attempts per round, and rounds: reading first and writing after lets two or
# more attempts through in most rounds, so three rounds of eight make a lucky pass very unlikely.
RACERS = 8
ROUNDS = 3


class ExerciseFailed(AssertionError):
    """The learner's code does not yet do what the exercise asks."""


@dataclasses.dataclass(frozen=True)
class Exercise:
    title: str
    hint_text: str
    solution_fn: Callable[..., Any]
    # Runs the learner's callable against the deployed stack and raises ExerciseFailed with
    # a message that says what went wrong (never just "wrong"); what went right, if nothing did.
    verify: Callable[[Callable[..., Any], dict], str]
    stack: dict | None = None

    def __call__(self, stack: dict) -> Exercise:
        """The exercise, bound to the deployed stack (the ``lab`` output)."""
        return dataclasses.replace(self, stack=stack)

    def check(self, candidate: Callable[..., Any]) -> str:
        if self.stack is None:
            raise TypeError(f"{self.title!r} needs the deployed stack first: ex = exercise(stack), then ex.check(...)")
        verdict = self.verify(candidate, self.stack)
        print(f"Correct: {verdict}")
        return verdict

    def hint(self) -> None:
        print(self.hint_text)

    def solution(self) -> None:
        print(inspect.getsource(self.solution_fn))


def expect(holds: Any, failure: str) -> None:
    """Unless ``holds``, ExerciseFailed with ``failure``: what the learner's code did, and why it is wrong."""
    if not holds:
        raise ExerciseFailed(failure)


def attempt(candidate: Callable[..., Any], *args: Any, what: str, advice: str = "") -> Any:
    """``candidate(*args)``; an exception it raises fails the exercise, naming ``what`` raised it."""
    try:
        return candidate(*args)
    except Exception as exc:
        raise ExerciseFailed(f"{what} raised {type(exc).__name__}: {exc}{advice}") from exc


def race(candidate: Callable[..., Any], args: list[tuple], what: str) -> list[Any]:
    """``candidate(*a)`` for every ``a`` in ``args`` at the same moment (a Table per thread in
    ``a``); the answers, or ExerciseFailed (after ``what``) when any attempt raised."""
    answers = settled([lambda a=a: candidate(*a) for a in args])
    if errors := [answer for answer in answers if isinstance(answer, Exception)]:
        first = f"{type(errors[0]).__name__}: {errors[0]}"
        raise ExerciseFailed(f"{what}: {len(errors)} of {len(args)} simultaneous attempts raised {first}")
    return answers
