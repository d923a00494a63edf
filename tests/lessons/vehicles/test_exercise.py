"""The answer key of lesson 1's exercise: the solution passes, wrong answers fail, saying why."""

from __future__ import annotations

import pytest

from idemlab.exercises import ExerciseFailed
from idemlab.exercises import vehicles as exercises
from support.notebook_cells import starting_point

# Generous: the first stack test of a session also waits for the one terraform apply.
pytestmark = [pytest.mark.stack, pytest.mark.timeout(600)]


def test_solution_passes_check(stack):
    assert "agreed on one stored registration" in exercises.exercise(stack).check(exercises.register_once)


def test_naive_put_fails_check_because_the_retry_overwrites(stack):
    with pytest.raises(ExerciseFailed, match="replaced the stored registration"):
        exercises.exercise(stack).check(starting_point("01_vehicles.ipynb", "register_once"))


def test_conditional_put_that_raises_on_a_retry_fails_check(stack):
    def raises_on_retry(table, registration):
        table.put_item(Item=registration, ConditionExpression="attribute_not_exists(request_id)")
        return registration

    with pytest.raises(ExerciseFailed, match="the retry raised ConditionalCheckFailedException"):
        exercises.exercise(stack).check(raises_on_retry)


def test_read_then_write_fails_check_in_the_race(stack):
    def read_then_write(table, registration):
        found = table.get_item(Key={"request_id": registration["request_id"]}, ConsistentRead=True).get("Item")
        if found:
            return found
        table.put_item(Item=registration)
        return registration

    with pytest.raises(ExerciseFailed, match="simultaneous attempts returned"):
        exercises.exercise(stack).check(read_then_write)


def test_swallowing_every_error_fails_check(stack):
    def swallows(table, registration):
        try:
            table.put_item(Item=registration, ConditionExpression="attribute_not_exists(request_id)")
        except Exception:
            stored = table.get_item(Key={"request_id": registration.get("request_id", "?")}, ConsistentRead=True)
            return stored.get("Item", registration)
        return registration

    with pytest.raises(ExerciseFailed, match="other errors must propagate"):
        exercises.exercise(stack).check(swallows)
