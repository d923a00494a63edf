"""The lesson 4 answer key, against the deployed stack: the solution passes, the naive key fails."""

from __future__ import annotations

import pytest

from idemlab.exercises import ExerciseFailed, lesson4
from support.notebook_cells import starting_point

pytestmark = pytest.mark.stack


def test_the_business_key_passes(stack):
    assert "retry" in lesson4.exercise(stack).check(lesson4.reservation_key)


def test_the_message_id_key_fails_naming_the_retry(stack):
    with pytest.raises(ExerciseFailed, match="sent twice"):
        lesson4.exercise(stack).check(starting_point("06_queues.ipynb", "reservation_key"))


def test_a_key_that_changes_with_each_delivery_fails(stack):
    with pytest.raises(ExerciseFailed, match="different keys"):
        lesson4.exercise(stack).check(lambda record: record["receiptHandle"])
