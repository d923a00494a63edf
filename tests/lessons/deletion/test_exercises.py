"""The answer key of lesson 3's exercises: each solution passes its check, and the naive
starting point fails it with a message that says why."""

from __future__ import annotations

import pytest

from idemlab.exercises import ExerciseFailed
from idemlab.exercises import deletion as exercises
from support.notebook_cells import starting_point


@pytest.fixture(scope="module")
def tables(stack) -> dict:
    """The deployed stack, as the notebooks pass it: every check uses requests of its own."""
    return stack


@pytest.mark.timeout(120)
def test_the_fenced_write_solution_passes(tables):
    assert "zombie" in exercises.fenced_write_exercise(tables).check(exercises.record_step)


@pytest.mark.timeout(120)
def test_the_naive_progress_write_fails_because_the_zombie_lands(tables):
    with pytest.raises(ExerciseFailed, match="token"):
        exercises.fenced_write_exercise(tables).check(starting_point("03_deletion_claims.ipynb", "record_step"))


@pytest.mark.timeout(120)
def test_the_goodbye_solution_passes(tables):
    assert "exactly one" in exercises.goodbye_exercise(tables).check(exercises.send_goodbye)


@pytest.mark.timeout(120)
def test_the_naive_goodbye_fails_because_a_retry_sends_again(tables):
    with pytest.raises(ExerciseFailed, match="2 emails"):
        exercises.goodbye_exercise(tables).check(starting_point("04_deletion_recovery.ipynb", "send_goodbye"))


def test_hints_and_solutions_print(tables, capsys):
    for exercise in (exercises.fenced_write_exercise(tables), exercises.goodbye_exercise(tables)):
        exercise.hint()
        exercise.solution()
    shown = capsys.readouterr().out
    assert "fencing_token" in shown and "attribute_not_exists(idempotency_key)" in shown
