"""The cancel race notebook 03 shows, through the lesson module on the deployed stack.
(The claim race of many workers is tests/test_deletion_concurrency.py.)"""

from __future__ import annotations

import pytest

from idemlab.lessons.deletion import Deletions


@pytest.fixture(scope="module")
def deletions(stack) -> Deletions:
    return Deletions(stack)


@pytest.mark.timeout(120)
def test_the_cancel_race_has_one_winner_per_round(deletions):
    tally = deletions.cancel_race(rounds=5)
    assert set(tally) <= {"cancel", "claim"} and sum(tally.values()) == 5
