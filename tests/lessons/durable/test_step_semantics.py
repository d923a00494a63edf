"""Lesson 09, counted: what AT_MOST_ONCE_PER_RETRY trades.

The SDK's StepConfig: AT_LEAST_ONCE_PER_RETRY (the default) runs an interrupted attempt
again; AT_MOST_ONCE_PER_RETRY checkpoints START first, and an interrupted attempt fails
with StepInterruptedError instead of running again (also the Lambda developer guide,
durable-basic-concepts). With one attempt, a crash after the email leaves one email and a
failed deletion (no duplicate); a crash before it leaves none (the email is lost), where
the default sends it on replay.
"""

from __future__ import annotations

import pytest

from idemlab.lessons.durable import Durables
from support.durable_scenario import private_stack


@pytest.fixture(scope="module")
def durables(backend, lambda_role) -> Durables:
    return Durables(private_stack(lambda_role))


def test_at_most_once_after_the_email_sends_no_second_one_and_the_step_surfaces(durables):
    request = durables.seed()
    durables.arm_crash_after_send(request)
    run = durables.start("erase_at_most_once", request)
    assert run.failed, run.answer
    # The step's error names the interruption: its attempt did not end, and is not run again.
    assert "was previously interrupted" in run.answer["errorMessage"], run.answer
    assert durables.emails(request["user_id"]) == 1


def test_at_most_once_before_the_email_loses_it(durables):
    request = durables.seed()
    durables.arm_crash_before_send(request)
    run = durables.start("erase_at_most_once", request)
    assert run.failed, run.answer
    assert durables.emails(request["user_id"]) == 0


def test_at_least_once_before_the_email_sends_it_on_replay(durables):
    request = durables.seed()
    durables.arm_crash_before_send(request)
    run = durables.start("erase_naive", request)
    assert not run.failed, run.answer
    assert durables.emails(request["user_id"]) == 1
