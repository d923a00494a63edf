"""The lesson 6 answer key, against the deployed stack: the solution passes, the naive key fails."""

from __future__ import annotations

import pytest

from idemlab.exercises import ExerciseFailed
from idemlab.exercises import queues as exercises
from support.notebook_cells import starting_point

pytestmark = pytest.mark.stack


def test_the_business_key_passes(stack):
    assert "retry" in exercises.exercise(stack).check(exercises.reservation_key)


def test_the_message_id_key_fails_naming_the_retry(stack):
    with pytest.raises(ExerciseFailed, match="sent twice"):
        exercises.exercise(stack).check(starting_point("06_queues.ipynb", "reservation_key"))


def test_a_key_that_changes_with_each_delivery_fails(stack):
    with pytest.raises(ExerciseFailed, match="different keys"):
        exercises.exercise(stack).check(lambda record: record["receiptHandle"])
