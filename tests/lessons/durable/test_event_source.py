"""Lesson 09, counted: an SQS-fed durable function has no execution name.

Lambda developer guide, durable-execution-idempotency: event source mappings do not
support idempotency, so each invocation, retries included, starts a new durable
execution; durable-invoking-esm: the mapping invokes synchronously and waits for the
execution. A deletion request that reaches the queue twice (a producer's retry, or a
standard queue's second copy) is two executions, and a key made of the execution and the
step is a different key in each: two goodbyes.
"""

from __future__ import annotations

import pytest

from idemlab.lessons import poll, queue_depth
from idemlab.lessons.durable import Durables
from support.durable_scenario import private_stack

DELIVERY_SECONDS = 120


@pytest.fixture(scope="module")
def durables(backend, lambda_role) -> Durables:
    return Durables(private_stack(lambda_role))


def test_one_delivery_is_one_execution(durables):
    request = durables.seed()
    durables.send("deletions", request)
    poll(lambda: durables.emails(request["user_id"]), DELIVERY_SECONDS, 0.5, what="the goodbye")
    assert durables.erased(request["user_id"])
    assert durables.emails(request["user_id"]) == 1


def test_the_same_request_delivered_twice_is_two_executions_and_two_goodbyes(durables):
    before = len(durables.executions("erase_from_queue"))
    request = durables.seed()
    durables.send("deletions", request)
    durables.send("deletions", request)
    poll(
        lambda: durables.emails(request["user_id"]),
        DELIVERY_SECONDS,
        0.5,
        until=lambda sent: sent >= 2,
        what="two goodbyes",
    )
    poll(
        lambda: [e for e in durables.executions("erase_from_queue") if e["Status"] != "RUNNING"],
        DELIVERY_SECONDS,
        0.5,
        until=lambda closed: len(closed) >= before + 2,
        what="two executions closed",
    )
    assert len(durables.executions("erase_from_queue")) == before + 2
    assert durables.emails(request["user_id"]) == 2


def test_a_dispatcher_naming_the_execution_by_the_request_starts_one_execution_for_two_copies(durables):
    """The remedy the same page names: a plain function takes the messages and starts the
    durable function itself, with the deletion request as the execution name."""
    request = durables.seed()
    durables.send("deletions_named", request)
    durables.send("deletions_named", request)
    named = poll(
        lambda: [
            e
            for e in durables.executions("erase_idempotent")
            if e["DurableExecutionName"] == request["deletion_request_id"]
        ],
        DELIVERY_SECONDS,
        0.5,
        until=lambda found: found and all(e["Status"] != "RUNNING" for e in found),
        what="the named execution closed",
    )
    # Both copies have been taken off the queue: the second one found the first execution.
    poll(
        lambda: queue_depth(durables.stack["queues"]["deletions_named"]),
        DELIVERY_SECONDS,
        0.5,
        until=lambda n: n == 0,
        what="the queue drained",
    )
    assert len(named) == 1
    assert durables.emails(request["user_id"]) == 1
