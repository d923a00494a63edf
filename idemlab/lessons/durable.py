"""Lesson 09's plumbing: the account deletion as a Lambda durable function.

``Durables(stack)`` takes the ``lab`` map (docs/DESIGN.md) and adds what the notebook and
the tests share: a user to delete (``seed``), a crash between the email and its checkpoint
(``arm_crash_after_send``) or before the email (``arm_crash_before_send``), a deletion
started by Invoke with or without an execution name (``start``), the emails the provider
holds for a user (``emails``), and the executions Lambda keeps for a function
(``executions``). Every call is a plain Lambda,
DynamoDB or S3 call: on AWS it is Lambda's durable execution service, on the embedded
backend AWS's local engine of it (``idemlab/embedded/durable_api.py``).
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import Any

from boto3.dynamodb.conditions import Attr

from idemlab import clients, faults, lambda_code, settings
from idemlab.lessons import Deployment, poll

FUNCTIONS_DIR = settings.ROOT / "functions" / "durable"
# The functions' keys in the stack's ``functions``: one per way of sending the goodbye.
KINDS = ("erase_naive", "erase_idempotent", "erase_at_most_once", "erase_from_queue", "erase_after_grace")
# How long a deletion may take to close: a crash waits out the function's timeout, then
# Lambda invokes the handler again.
CLOSE_SECONDS = 120
RECORDS_PER_USER = 3  # enough that "deleted_records" is a count, not a flag


def erasure():
    """``functions/durable/erasure.py`` as the zip has it: its fault point, its steps."""
    return lambda_code.load(FUNCTIONS_DIR, "erasure")


@dataclass(frozen=True)
class Run:
    """One Invoke of a durable deletion, as its caller saw it."""

    arn: str | None  # the durable execution the Invoke started or found (X-Amz-Durable-Execution-Arn)
    answer: Any  # the execution's result, or its error document
    failed: bool  # the Invoke answered with a FunctionError


class Durables(Deployment):
    """The durable deletion's functions, tables and bucket, by key."""

    def seed(self, user_id: str | None = None) -> dict:
        """A user with records, a file and an identity; the deletion request for them."""
        user_id = user_id or f"user-{uuid.uuid4().hex[:12]}"
        records = self.table("user_records")
        for number in range(RECORDS_PER_USER):
            records.put_item(Item={"user_id": user_id, "record_id": f"r{number}", "data": "personal"})
        self.table("identities").put_item(Item={"user_id": user_id, "email": f"{user_id}@example.com"})
        clients.client("s3").put_object(
            Bucket=self.stack["buckets"]["user_files"], Key=f"{user_id}/photo.jpg", Body=b"x"
        )
        return {
            "deletion_request_id": f"del-{uuid.uuid4().hex[:12]}",
            "user_id": user_id,
            "goodbye_address": f"{user_id}@example.com",
        }

    def arm_crash_after_send(self, request: dict, times: int = 1) -> str:
        """Crash the next ``times`` sends of this deletion's goodbye after the provider has it."""
        return self._arm_crash(erasure().AFTER_SEND, request, times)

    def arm_crash_before_send(self, request: dict, times: int = 1) -> str:
        """Crash the next ``times`` sends of this deletion's goodbye before the provider has it."""
        return self._arm_crash(erasure().BEFORE_SEND, request, times)

    def _arm_crash(self, point: str, request: dict, times: int) -> str:
        crash = faults.contract().CRASH
        return faults.arm(self.table("faults"), point, request["deletion_request_id"], crash, times)

    def start(self, kind: str, request: dict, name: str | None = None, invocation_type: str = "RequestResponse") -> Run:
        """Invoke the ``kind`` deletion with ``request``, under execution name ``name`` if given."""
        options = {"DurableExecutionName": name} if name else {}
        response = self.lambda_.invoke(
            FunctionName=self.stack["functions"][kind],
            InvocationType=invocation_type,
            Payload=json.dumps(request).encode(),
            **options,
        )
        body = response["Payload"].read()
        return Run(response.get("DurableExecutionArn"), json.loads(body) if body else None, "FunctionError" in response)

    def send(self, queue_key: str, request: dict) -> None:
        """One message with the deletion request, to the stack's queue ``queue_key``."""
        clients.client("sqs").send_message(QueueUrl=self.stack["queues"][queue_key], MessageBody=json.dumps(request))

    def execution(self, arn: str) -> dict:
        """GetDurableExecution once the execution has closed."""
        return poll(
            lambda: self.lambda_.get_durable_execution(DurableExecutionArn=arn),
            CLOSE_SECONDS,
            0.2,
            until=lambda found: found["Status"] != "RUNNING",
            what=f"durable execution {arn} to close",
        )

    def executions(self, kind: str) -> list[dict]:
        """The durable executions Lambda keeps for the ``kind`` function (ListDurableExecutionsByFunction)."""
        found = []
        options: dict = {}
        while True:
            page = self.lambda_.list_durable_executions_by_function(
                FunctionName=self.stack["functions"][kind], **options
            )
            found.extend(page.get("DurableExecutions", []))
            if not page.get("NextMarker"):
                return found
            options = {"Marker": page["NextMarker"]}

    def history(self, arn: str) -> list[dict]:
        """The execution's events (GetDurableExecutionHistory), oldest first."""
        events, options = [], {}
        while True:
            page = self.lambda_.get_durable_execution_history(DurableExecutionArn=arn, **options)
            events.extend(page.get("Events", []))
            if not page.get("NextMarker"):
                return events
            options = {"Marker": page["NextMarker"]}

    def emails(self, user_id: str) -> int:
        """Goodbye emails the provider holds for the user."""
        outbox = self.table("email_outbox")
        items, options = [], {"FilterExpression": Attr("user_id").eq(user_id), "ConsistentRead": True}
        while True:
            page = outbox.scan(**options)
            items.extend(page["Items"])
            if "LastEvaluatedKey" not in page:
                return len(items)
            options["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def erased(self, user_id: str) -> bool:
        """Whether the user's records, files and identity are all gone."""
        records = self.table("user_records").query(
            KeyConditionExpression="user_id = :user", ExpressionAttributeValues={":user": user_id}
        )["Items"]
        identity = self.table("identities").get_item(Key={"user_id": user_id}).get("Item")
        files = clients.client("s3").list_objects_v2(Bucket=self.stack["buckets"]["user_files"], Prefix=f"{user_id}/")
        return not records and identity is None and not files.get("Contents")
