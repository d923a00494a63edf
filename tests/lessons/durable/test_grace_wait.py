"""Lesson 09, counted: the 30-day grace period as ``context.wait``.

On the embedded backend AWS's runner skips the wait's wall-clock time (its own
``skip_time`` option): the deletion closes in seconds, and the execution's history still
records a wait of 30 days, with no invocation running through it.
"""

from __future__ import annotations

import pytest

from idemlab.lessons import durable
from idemlab.lessons.durable import Durables
from support.durable_scenario import private_stack

THIRTY_DAYS_SECONDS = 30 * 24 * 3600


@pytest.fixture(scope="module")
def durables(backend, lambda_role) -> Durables:
    return Durables(private_stack(lambda_role))


def test_a_thirty_day_wait_is_recorded_whole_and_the_deletion_follows_it(durables):
    request = durables.seed()
    # Asynchronously, as on AWS: a synchronous Invoke waits 15 minutes at most.
    run = durables.start("erase_after_grace", request, invocation_type="Event")
    assert durables.execution(run.arn)["Status"] == "SUCCEEDED"
    assert durables.erased(request["user_id"])
    assert durables.emails(request["user_id"]) == 1
    events = durables.history(run.arn)
    waits = [e["WaitStartedDetails"] for e in events if e["EventType"] == "WaitStarted"]
    assert [wait["Duration"] for wait in waits] == [THIRTY_DAYS_SECONDS], events
    started = next(e for e in events if e["EventType"] == "WaitStarted")
    assert (waits[0]["ScheduledEndTimestamp"] - started["EventTimestamp"]).total_seconds() == pytest.approx(
        THIRTY_DAYS_SECONDS, abs=5
    )


def test_a_deletion_after_the_grace_period_is_six_operations_in_two_invocations(durables):
    """The start, the wait and four steps; one invocation before the wait, one after it."""
    request = durables.seed()
    run = durables.start("erase_after_grace", request, invocation_type="Event")
    assert durables.execution(run.arn)["Status"] == "SUCCEEDED"
    usage = durable.durable_usage(durables.history(run.arn, with_data=True))
    assert (usage.operations, usage.invocations) == (6, 2), usage
    # The input, four step results and the output: a few hundred bytes, kept 30 days and a retention.
    assert 200 < usage.bytes_written < 2000, usage
    assert usage.retained_days == pytest.approx(30 + durable.RETENTION_DAYS, abs=0.01)
