"""The stories notebook 03 tells, run on private tables: the same outcomes it asserts."""

from __future__ import annotations

import matplotlib
import pytest

from idemlab import clients
from idemlab.lessons import deletion

matplotlib.use("Agg")


@pytest.fixture(scope="module")
def lab(backend) -> dict:
    return {"tables": deletion.create_tables(clients.client("dynamodb"))}


def test_the_zombie_story_ends_with_the_late_write_refused(lab):
    timeline, story = deletion.zombie_story(lab, lease_seconds=30)
    assert (story["early_claim"], story["zombie_write"], story["tokens"]) == ("in_progress", "refused", (1, 2))
    assert story["final"].status.value == "COMPLETED"
    refused = [(worker, label) for _, worker, label, accepted in timeline.events if accepted is False]
    assert refused == [("worker B", "claim: in_progress"), ("worker A", "wakes, writes with token 1")]
    assert timeline.draw("test").get_title() == "test"


@pytest.mark.timeout(120)
def test_the_claim_race_has_one_winner_per_round(lab):
    race = deletion.claim_race(lab, workers=6, rounds=5)
    assert race["winners_per_round"] == {1: 5}
    assert race["outcomes"] == {"claimed": 5, "in_progress": 25}


@pytest.mark.timeout(120)
def test_the_cancel_race_has_one_winner_per_round(lab):
    tally = deletion.cancel_race(lab, rounds=5)
    assert set(tally) <= {"cancel", "claim"} and sum(tally.values()) == 5
