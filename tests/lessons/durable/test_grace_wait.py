"""Lesson 09, counted: the 30-day grace period as ``context.wait``.

On the embedded backend AWS's runner skips the wait's wall-clock time (its own
``skip_time`` option): the deletion closes in seconds, and the execution's history still
records a wait of 30 days, with no invocation running through it.
"""

from __future__ import annotations

import pytest

from idemlab.lessons.durable import Durables
from support.durable_scenario import private_stack

THIRTY_DAYS_SECONDS = 30 * 24 * 3600


@pytest.fixture(scope="module")
def durables(backend, lambda_role) -> Durables:
    return Durables(private_stack(lambda_role))


def test_a_thirty_day_wait_is_recorded_whole_and_the_deletion_follows_it(durables):
    request = durables.seed()
    run = durables.start("erase_after_grace", request)
    assert not run.failed, run.answer
    assert durables.erased(request["user_id"])
    assert durables.emails(request["user_id"]) == 1
    events = durables.history(run.arn)
    waits = [e["WaitStartedDetails"] for e in events if e["EventType"] == "WaitStarted"]
    assert [wait["Duration"] for wait in waits] == [THIRTY_DAYS_SECONDS], events
    started = next(e for e in events if e["EventType"] == "WaitStarted")
    assert (waits[0]["ScheduledEndTimestamp"] - started["EventTimestamp"]).total_seconds() == pytest.approx(
        THIRTY_DAYS_SECONDS, abs=5
    )
