"""The queue ARNs the module writes into IAM policies before the queues exist are the ARNs
the queues got.

The module names queues in its IAM statements by the ARN it expects (partition, region,
account and name), so roles and functions need not wait for the provider's waits on each
queue. The embedded backend does not enforce IAM, so a wrong ARN would pass every other
test and fail only on AWS: this compares the deployed policies with the created queues.
"""

from __future__ import annotations

import json

import pytest

from idemlab import clients

pytestmark = pytest.mark.stack


def _statements(role_name: str) -> list[dict]:
    iam = clients.client("iam")
    statements = []
    for name in iam.list_role_policies(RoleName=role_name)["PolicyNames"]:
        document = iam.get_role_policy(RoleName=role_name, PolicyName=name)["PolicyDocument"]
        if isinstance(document, str):
            document = json.loads(document)
        statements.extend(document["Statement"])
    return statements


def _queue_resources(statements: list[dict]) -> set[str]:
    resources = set()
    for statement in statements:
        actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
        if any(action.startswith("sqs:") for action in actions):
            named = statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]
            resources.update(named)
    return resources


def test_every_queue_a_function_policy_names_is_a_queue_the_stack_created(stack):
    created = set(stack["queue_arns"].values())
    lambda_client = clients.client("lambda")
    named = set()
    for function in stack["functions"].values():
        role_arn = lambda_client.get_function_configuration(FunctionName=function)["Role"]
        named |= _queue_resources(_statements(role_arn.rsplit("/", 1)[1]))
    assert named, "no function policy names a queue"
    assert named <= created, f"policies name queues that do not exist: {sorted(named - created)}"


def test_every_mapped_queue_is_readable_by_its_functions_role(stack):
    lambda_client = clients.client("lambda")
    mappings = lambda_client.list_event_source_mappings()["EventSourceMappings"]
    ours = [m for m in mappings if m["EventSourceArn"] in set(stack["queue_arns"].values())]
    assert ours, "the stack maps no queue to a function"
    for mapping in ours:
        role_arn = lambda_client.get_function_configuration(FunctionName=mapping["FunctionArn"])["Role"]
        readable = set()
        for statement in _statements(role_arn.rsplit("/", 1)[1]):
            actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
            if "sqs:ReceiveMessage" in actions:
                readable.update(statement["Resource"])
        assert mapping["EventSourceArn"] in readable, (mapping["FunctionArn"], sorted(readable))


def test_the_scheduler_role_may_send_to_the_scheduler_dead_letter_queue(stack):
    # Every function is told the role Scheduler assumes (the handlers create schedules).
    function = next(iter(stack["functions"].values()))
    environment = clients.client("lambda").get_function_configuration(FunctionName=function)["Environment"]
    role_arn = environment["Variables"]["SCHEDULER_ROLE_ARN"]
    assert stack["queue_arns"]["scheduler_dlq"] in _queue_resources(_statements(role_arn.rsplit("/", 1)[1]))
