"""What `make workshop-destroy` proves and what docs/aws.md says, each against the session's
embedded backend (no workshop deployed: tests/harness/test_workshop_isolation.py does that)."""

from __future__ import annotations

import io
import uuid
import zipfile

import pytest

from idemlab import clients, workshop
from tests.harness.test_workshop_isolation import DOCS, assert_docs_counts

pytestmark = pytest.mark.timeout(600)


def a_zip() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("handler.py", "def handler(event, context):\n    return event\n")
    return buffer.getvalue()


def test_the_leftover_listing_finds_untagged_resources_by_name(backend, lambda_role):
    name = f"w{uuid.uuid4().hex[:6]}"  # a participant nobody else in this session uses
    stranger = f"{name}x-table"  # starts with the name, not with the name plus "-": not the workshop's
    lambda_, logs = clients.client("lambda"), clients.client("logs")
    dynamodb, sqs = clients.client("dynamodb"), clients.client("sqs")
    key = {"KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}], "BillingMode": "PAY_PER_REQUEST"}
    key["AttributeDefinitions"] = [{"AttributeName": "pk", "AttributeType": "S"}]
    for table in (f"{name}-orphan", stranger):
        dynamodb.create_table(TableName=table, **key)  # no tags
    conformance_queue = f"{workshop.CONFORMANCE_PREFIX}{name}-queue"
    queue_url = sqs.create_queue(QueueName=conformance_queue)["QueueUrl"]
    function = f"{name}-checkout-naive-variant"
    lambda_.create_function(
        FunctionName=function,
        Runtime="python3.12",
        Role=lambda_role,
        Handler="handler.handler",
        Code={"ZipFile": a_zip()},
    )
    logs.create_log_group(logGroupName=f"/aws/lambda/{function}")
    try:
        left = workshop.leftovers([name])
        assert conformance_queue in left["SQS queues"]
        # The session's backend holds the conformance suite's own resources while it runs
        # (a worker that ran it first has its tables): they are listed too, and left out here.
        ours = {
            service: [found for found in names if workshop.CONFORMANCE_PREFIX not in found]
            for service, names in left.items()
        }
        assert ours["DynamoDB tables"] == [f"{name}-orphan"]
        assert ours["Lambda functions"] == [function]
        assert ours["CloudWatch log groups"] == [f"/aws/lambda/{function}"]
        # The teardown deletes only what carries a workshop participant's tag: this function
        # has none, so it stays (and the listing above still reports it).
        assert workshop.remove_runtime_leftovers([name]) == []
        assert lambda_.get_function(FunctionName=function)["Configuration"]["FunctionName"] == function
    finally:
        lambda_.delete_function(FunctionName=function)
        logs.delete_log_group(logGroupName=f"/aws/lambda/{function}")
        sqs.delete_queue(QueueUrl=queue_url)
        for table in (f"{name}-orphan", stranger):
            dynamodb.delete_table(TableName=table)
    # What this test made is gone. (The listing also names what other tests of this session
    # keep on the shared backend, the conformance suite's `idemlab-conf-` fixtures among them.)
    left = [found for names in workshop.leftovers([name]).values() for found in names if name in found]
    assert left == []


def test_docs_state_the_stacks_planned_resources_and_idle_cost(backend):
    from idemlab import stack

    resources = stack.planned_resources(prefix=f"d{uuid.uuid4().hex[:6]}")
    assert_docs_counts(resources, DOCS.read_text())
