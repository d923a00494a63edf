"""Lesson 9: the exercise's answer key against its starting point, on the deployed stack.

The check deploys the candidate inside the lesson's durable deletion and attacks it; the
answer key must pass, and each key the lesson shows must fail where the lesson says it does."""

from __future__ import annotations

import pytest

from idemlab.exercises import ExerciseFailed
from idemlab.exercises import durable as exercises
from idemlab.lessons import durable
from support.notebook_cells import starting_point

pytestmark = pytest.mark.stack


@pytest.fixture(scope="module")
def ex(stack):
    return exercises.exercise(stack)


@pytest.mark.timeout(300)
def test_the_answer_key_sends_one_goodbye_per_deletion_request(ex):
    assert "one goodbye per deletion request" in ex.check(exercises.goodbye_key)


@pytest.mark.timeout(300)
def test_the_starting_point_a_key_of_the_execution_sends_twice_for_two_executions(ex):
    with pytest.raises(ExerciseFailed, match=r"started twice without an execution name: 2 emails"):
        ex.check(starting_point("09_durable.ipynb", "goodbye_key"))


@pytest.mark.timeout(300)
def test_no_key_sends_twice_after_a_crash(ex):
    with pytest.raises(ExerciseFailed, match=r"after a crash between the email and its checkpoint: 2 emails"):
        ex.check(durable.module("erase_naive").no_key)


@pytest.mark.timeout(300)
def test_one_key_for_every_request_leaves_the_next_request_without_a_goodbye(ex):
    def the_same_for_all(request, execution_arn, step_name):
        return "goodbye"

    with pytest.raises(ExerciseFailed, match=r"no goodbye at all"):
        ex.check(the_same_for_all)
