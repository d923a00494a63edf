"""Lesson 09, counted: a crash between the goodbye email and its checkpoint.

Lambda replays a durable function from the top after a failure; a completed step returns
its checkpoint, an interrupted one runs again (Lambda developer guide,
durable-basic-concepts; durable-execution-idempotency: "Steps have at-least-once execution
semantics by default"). The naive send step therefore sends twice, the keyed one once.
"""

from __future__ import annotations

import pytest

from idemlab.lessons.durable import Durables
from support.durable_scenario import private_stack


@pytest.fixture(scope="module")
def durables(backend, lambda_role) -> Durables:
    return Durables(private_stack(lambda_role))


def test_a_clean_deletion_erases_everything_and_sends_one_goodbye(durables):
    request = durables.seed()
    run = durables.start("erase_naive", request)
    assert not run.failed, run.answer
    assert (run.answer or {}).get("deleted_records") == 3, run
    assert run.answer["deleted_files"] == 1
    assert durables.erased(request["user_id"])
    assert durables.emails(request["user_id"]) == 1


def test_naive_send_step_replayed_after_a_crash_sends_two_goodbyes(durables):
    request = durables.seed()
    durables.arm_crash_after_send(request)
    run = durables.start("erase_naive", request)
    assert not run.failed, run.answer
    assert durables.erased(request["user_id"])
    assert durables.emails(request["user_id"]) == 2


def test_keyed_send_step_replayed_after_a_crash_sends_one_goodbye(durables):
    request = durables.seed()
    durables.arm_crash_after_send(request)
    run = durables.start("erase_idempotent", request)
    assert not run.failed, run.answer
    assert durables.erased(request["user_id"])
    assert durables.emails(request["user_id"]) == 1
