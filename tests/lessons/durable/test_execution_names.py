"""Lesson 09, counted: the execution name as the idempotency key of a start.

Lambda developer guide, durable-execution-idempotency: the same name with an identical
payload while the execution runs returns that execution and starts none; another payload
is refused with DurableExecutionAlreadyStartedException; without a name every Invoke
starts a new execution.
"""

from __future__ import annotations

import pytest

from idemlab.lessons.durable import Durables
from support.durable_scenario import private_stack


@pytest.fixture(scope="module")
def durables(backend, lambda_role) -> Durables:
    return Durables(private_stack(lambda_role))


def test_same_name_and_payload_start_one_execution(durables):
    request = durables.seed()
    name = request["deletion_request_id"]
    first = durables.start("erase_naive", request, name=name, invocation_type="Event")
    second = durables.start("erase_naive", request, name=name, invocation_type="Event")
    assert first.arn and first.arn == second.arn
    assert durables.execution(first.arn)["Status"] == "SUCCEEDED"
    named = [e for e in durables.executions("erase_naive") if e["DurableExecutionName"] == name]
    assert len(named) == 1
    assert durables.emails(request["user_id"]) == 1


def test_same_name_with_another_payload_is_refused(durables):
    request = durables.seed()
    name = request["deletion_request_id"]
    durables.start("erase_naive", request, name=name, invocation_type="Event")
    other = {**request, "goodbye_address": "someone-else@example.com"}
    with pytest.raises(durables.lambda_.exceptions.DurableExecutionAlreadyStartedException):
        durables.start("erase_naive", other, name=name, invocation_type="Event")


def test_without_a_name_each_invoke_starts_an_execution(durables):
    request = durables.seed()
    first = durables.start("erase_naive", request, invocation_type="Event")
    second = durables.start("erase_naive", request, invocation_type="Event")
    assert first.arn != second.arn
    for run in (first, second):
        assert durables.execution(run.arn)["Status"] == "SUCCEEDED"
    assert durables.emails(request["user_id"]) == 2
