"""The lesson 2 exercise's answer key, checked both ways on the deployed stack."""

from __future__ import annotations

import pytest

from idemlab.exercises import ExerciseFailed
from idemlab.exercises import checkout as exercises
from support.notebook_cells import starting_point

pytestmark = pytest.mark.stack


@pytest.fixture(scope="module")
def ex(stack):
    return exercises.exercise(stack)


@pytest.mark.timeout(120)
def test_solution_passes_the_check(ex):
    assert "charged once" in ex.check(exercises.charge_once)


@pytest.mark.timeout(120)
def test_check_then_charge_fails_the_race(ex):
    with pytest.raises(ExerciseFailed, match=r"simultaneous attempts made [2-8] charges"):
        ex.check(starting_point("02_checkout.ipynb", "charge_once"))


@pytest.mark.timeout(120)
def test_an_answer_that_never_charges_fails(ex):
    def pretend(table, order, charge_card):
        return "ch_made_up"

    with pytest.raises(ExerciseFailed, match="made 0 charges"):
        ex.check(pretend)


@pytest.mark.timeout(120)
def test_an_answer_that_charges_every_retry_fails(ex):
    def charge_always(table, order, charge_card):
        return charge_card(order)

    with pytest.raises(ExerciseFailed, match="made 2 charges"):
        ex.check(charge_always)
