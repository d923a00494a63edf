"""Lesson 09's plumbing: the account deletion as a Lambda durable function.

``deploy(stack)`` creates the lesson's functions beside the deployed stack (durability is set
only when a function is created, and the module has no rows for them yet) and returns a
``Durables`` over them; ``Durables.remove`` deletes them again. ``Durables(stack)`` takes a map
of the ``lab`` output's shape (docs/DESIGN.md) and adds what the notebook and the tests share:
a user to delete (``seed``), a crash between the email and its checkpoint
(``arm_crash_after_send``) or before the email (``arm_crash_before_send``), a deletion
started by Invoke with or without an execution name (``start``), the emails the provider
holds for a user (``emails``), and the executions Lambda keeps for a function
(``executions``). Every call is a plain Lambda,
DynamoDB or S3 call: on AWS it is Lambda's durable execution service, on the embedded
backend AWS's local engine of it (``idemlab/embedded/durable_api.py``).
"""

from __future__ import annotations

import contextlib
import functools
import json
import uuid
from dataclasses import dataclass
from typing import Any

from boto3.dynamodb.conditions import Attr

from idemlab import build, clients, faults, lambda_code, settings
from idemlab.bench import prices
from idemlab.lessons import Deployment, poll

FUNCTIONS_DIR = settings.ROOT / "functions" / "durable"
# The functions' keys in the stack's ``functions``: one per way of sending the goodbye.
KINDS = ("erase_naive", "erase_idempotent", "erase_at_most_once", "erase_from_queue", "erase_after_grace")
# The plain function that names each execution by the deletion request (fed by ``deletions_named``).
DISPATCHER = "dispatch_named"
# Each queue and the function its event source mapping feeds, one message per invocation.
QUEUES = {"deletions": "erase_from_queue", "deletions_named": DISPATCHER}
# The deployed function whose role and environment the lesson's functions borrow: it may
# already read and delete the user's records, files and identity, write the email outbox and
# read the faults, which is all the durable deletion does (functions.tf).
TEMPLATE_FUNCTION = "naive_deletion_worker"
# Lambda runs durable functions on python3.13 and python3.14 only (Lambda developer guide,
# durable-supported-runtimes); the embedded backend runs every function on the lab's Python.
RUNTIME = "python3.13"
# Long enough for a cold worker to import boto3 and the SDK on a loaded machine; a crash after
# the send waits it out (a crash is a run past the timeout: functions/shared/faults.py).
FUNCTION_TIMEOUT_SECONDS = 20
# How long Lambda lets one execution run, replays included: five minutes for the deletions
# that do not wait; 31 days for the one that waits out the 30-day grace period first.
EXECUTION_TIMEOUT_SECONDS = 300
GRACE_EXECUTION_TIMEOUT_SECONDS = 31 * 24 * 3600
# How long Lambda keeps a closed execution's history (1 to 90 days; Lambda developer guide,
# durable-configuration): the lesson reads it at once, so the minimum.
RETENTION_DAYS = 1
# How long a deletion may take to close: a crash waits out the function's timeout, then
# Lambda invokes the handler again.
CLOSE_SECONDS = 120
RECORDS_PER_USER = 3  # enough that "deleted_records" is a count, not a flag


def module(name: str):
    """The module ``functions/durable/<name>.py`` as the zip has it, to read or show."""
    return lambda_code.load(FUNCTIONS_DIR, name)


def erasure():
    """``functions/durable/erasure.py`` as the zip has it: its fault point, its steps."""
    return module("erasure")


@dataclass(frozen=True)
class Run:
    """One Invoke of a durable deletion, as its caller saw it."""

    arn: str | None  # the durable execution the Invoke started or found (X-Amz-Durable-Execution-Arn)
    answer: Any  # the execution's result, or its error document
    failed: bool  # the Invoke answered with a FunctionError


class Durables(Deployment):
    """The durable deletion's functions, tables and bucket, by key."""

    def __init__(self, stack: dict):
        super().__init__(stack)
        self.created: dict[str, list[str]] = {"functions": [], "queues": []}

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

    def history(self, arn: str, with_data: bool = False) -> list[dict]:
        """The execution's events (GetDurableExecutionHistory), oldest first; ``with_data``:
        with the payloads (input, step results, output) instead of their truncated marks."""
        events, options = [], {"IncludeExecutionData": with_data}
        while True:
            page = self.lambda_.get_durable_execution_history(DurableExecutionArn=arn, **options)
            events.extend(page.get("Events", []))
            if not page.get("NextMarker"):
                return events
            options = {"IncludeExecutionData": with_data, "Marker": page["NextMarker"]}

    def steps(self, arn: str) -> list[tuple[str, str]]:
        """(event, step or wait) for each step and wait event of the execution, and each
        invocation's end, in order: what the execution ran, replays included."""
        shown = []
        for event in self.history(arn):
            if event["EventType"] == "InvocationCompleted":
                shown.append(("InvocationCompleted", ""))
            elif event.get("SubType") in ("Step", "Wait"):
                shown.append((event["EventType"], event["Name"]))
        return shown

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

    def remove(self) -> list[str]:
        """Delete the functions, mappings and queues ``deploy`` created (the stack's own stay)."""
        removed = []
        for name in self.created["functions"]:
            for mapping in self.lambda_.list_event_source_mappings(FunctionName=name)["EventSourceMappings"]:
                with contextlib.suppress(self.lambda_.exceptions.ResourceNotFoundException):
                    self.lambda_.delete_event_source_mapping(UUID=mapping["UUID"])
            with contextlib.suppress(self.lambda_.exceptions.ResourceNotFoundException):
                self.lambda_.delete_function(FunctionName=name)
            removed.append(name)
        sqs = clients.client("sqs")
        for url in self.created["queues"]:
            with contextlib.suppress(sqs.exceptions.QueueDoesNotExist):
                sqs.delete_queue(QueueUrl=url)
            removed.append(url.rsplit("/", 1)[-1])
        self.created = {"functions": [], "queues": []}
        return removed


@functools.lru_cache(maxsize=1)
def lesson_zip() -> bytes:
    """functions/durable plus the shared package and Powertools, as ``make deploy`` packs a lesson."""
    return build.zip_bytes({**build.source_files(FUNCTIONS_DIR), **build.bundled_files()})


def create_functions(role: str, environment: dict[str, str], prefix: str, tags: dict | None = None) -> dict[str, str]:
    """The durable deletions (``KINDS``) and the dispatcher, named ``<prefix>-<key>``, with
    ``role`` and ``environment``; their names by key, once each is active."""
    lambda_ = clients.client("lambda")
    names = {key: f"{prefix}-{key}"[:64] for key in (*KINDS, DISPATCHER)}
    variables = {**environment, "ERASE_IDEMPOTENT_FUNCTION": names["erase_idempotent"]}
    for key, name in names.items():
        durable = {}
        if key != DISPATCHER:
            timeout = GRACE_EXECUTION_TIMEOUT_SECONDS if key == "erase_after_grace" else EXECUTION_TIMEOUT_SECONDS
            durable = {"DurableConfig": {"ExecutionTimeout": timeout, "RetentionPeriodInDays": RETENTION_DAYS}}
        lambda_.create_function(
            FunctionName=name,
            Runtime=RUNTIME,
            Role=role,
            Handler=f"{key}.handler",
            Code={"ZipFile": lesson_zip()},
            Timeout=FUNCTION_TIMEOUT_SECONDS,
            Environment={"Variables": variables},
            Tags=tags or {},
            **durable,
        )
    for name in names.values():
        lambda_.get_waiter("function_active_v2").wait(FunctionName=name)
    return names


def create_queues(functions: dict[str, str], prefix: str, tags: dict | None = None) -> dict[str, str]:
    """``QUEUES``, each mapped to its function one message at a time; their URLs by key."""
    sqs = clients.client("sqs")
    urls = {}
    for key, function_key in QUEUES.items():
        # Lambda refuses a mapping whose queue hides a message for less than the function's
        # timeout; six times the timeout is AWS's advice for a queue that feeds Lambda.
        attributes = {"VisibilityTimeout": str(6 * FUNCTION_TIMEOUT_SECONDS)}
        url = sqs.create_queue(QueueName=f"{prefix}-{key}"[:80], Attributes=attributes, tags=tags or {})["QueueUrl"]
        arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        clients.client("lambda").create_event_source_mapping(
            FunctionName=functions[function_key], EventSourceArn=arn, BatchSize=1
        )
        urls[key] = url
    return urls


def deploy(stack: dict) -> Durables:
    """The lesson's functions and queues, created beside the deployed stack with the role and
    environment of its ``TEMPLATE_FUNCTION`` (so its tables and bucket), and tagged like it
    (so `make workshop-destroy` and the leftover check count them as the participant's)."""
    lambda_ = clients.client("lambda")
    template = lambda_.get_function_configuration(FunctionName=stack["functions"][TEMPLATE_FUNCTION])
    tags = lambda_.list_tags(Resource=template["FunctionArn"])["Tags"]
    prefix = f"{template['FunctionName'][:24]}-d9-{uuid.uuid4().hex[:6]}"
    functions = create_functions(template["Role"], template["Environment"]["Variables"], prefix, tags)
    queues = create_queues(functions, prefix, tags)
    lesson = Durables(
        {**stack, "functions": {**stack["functions"], **functions}, "queues": {**stack["queues"], **queues}}
    )
    lesson.created = {"functions": list(functions.values()), "queues": list(queues.values())}
    return lesson


# What one execution is billed for, read from its history; priced with ``prices``.
@dataclass(frozen=True)
class DurableUsage:
    """What Lambda bills a durable execution for, beyond the handler's own invocations."""

    operations: int  # durable operations: the start, each step, each wait
    invocations: int  # the handler's invocations (the first run and each replay)
    bytes_written: int  # checkpointed data: the input, each step's result, the output
    retained_days: float  # how long that data is kept: the execution's life, then its retention

    def usd(self) -> dict[str, float]:
        """This execution's charges by line, in dollars (``prices``, us-east-1)."""
        gigabytes = self.bytes_written / 1e9
        return {
            "durable operations": self.operations * prices.LAMBDA_DURABLE_USD_PER_MILLION_OPERATIONS / 1e6,
            "data written": gigabytes * prices.LAMBDA_DURABLE_USD_PER_GB_WRITTEN,
            "data retained": gigabytes * prices.LAMBDA_DURABLE_USD_PER_GB_MONTH * self.retained_days / 30,
            "Lambda requests": self.invocations * prices.LAMBDA_USD_PER_MILLION_REQUESTS / 1e6,
        }


def durable_usage(events: list[dict], retention_days: int = RETENTION_DAYS) -> DurableUsage:
    """The usage of one closed execution from its history read ``with_data``."""
    operations = {event["Id"] for event in events if event.get("SubType")}
    payloads = []
    for event in events:
        for details in ("ExecutionStartedDetails", "StepSucceededDetails", "ExecutionSucceededDetails"):
            found = event.get(details, {})
            payload = found.get("Input", found.get("Result", {})).get("Payload")
            if payload:
                payloads.append(payload)
    life = events[-1]["EventTimestamp"] - events[0]["EventTimestamp"]
    return DurableUsage(
        operations=1 + len(operations),
        invocations=sum(event["EventType"] == "InvocationCompleted" for event in events),
        bytes_written=sum(len(payload.encode()) for payload in payloads),
        retained_days=life.total_seconds() / 86400 + retention_days,
    )


@dataclass(frozen=True)
class WorkflowUsage:
    """What the Scheduler version of lessons 03-04 is billed for per deletion, beyond DynamoDB."""

    schedule_invocations: int  # the one-time schedule that fires when the grace period ends
    state_transitions: int  # each state the Standard workflow entered (retries would add more)
    lambda_invocations: int  # the workflow's Lambda tasks

    def usd(self) -> dict[str, float]:
        return {
            "Scheduler invocations": self.schedule_invocations * prices.SCHEDULER_USD_PER_MILLION_INVOCATIONS / 1e6,
            "state transitions": self.state_transitions * prices.STEP_FUNCTIONS_USD_PER_THOUSAND_TRANSITIONS / 1e3,
            "Lambda requests": self.lambda_invocations * prices.LAMBDA_USD_PER_MILLION_REQUESTS / 1e6,
        }


def workflow_usage(events: list[dict]) -> WorkflowUsage:
    """The usage of one ``account_deletion`` execution from its Step Functions history."""
    return WorkflowUsage(
        schedule_invocations=1,
        state_transitions=sum(bool(event.get("stateEnteredEventDetails")) for event in events),
        lambda_invocations=sum(event["type"] == "LambdaFunctionScheduled" for event in events),
    )


WAYS = ("durable function, context.wait", "Scheduler + Step Functions")


def cost_table(durable: DurableUsage, workflow: WorkflowUsage, deletions: int = 1_000_000) -> list[dict]:
    """Rows of what ``deletions`` deletions cost each way (``WAYS``), by line: ``usd`` in dollars."""
    rows = []
    for way, usage in zip(WAYS, (durable, workflow), strict=True):
        for line, usd in usage.usd().items():
            rows.append({"way": way, "line": line, "usd": round(usd * deletions, 2)})
    return rows


def scheduled_deletion_history(stack: dict) -> list[dict]:
    """One deletion the way lessons 03-04 run it, on the deployed stack: a due request and a
    seeded user, the ``account_deletion`` workflow started as the schedule's target starts it;
    the execution's Step Functions history once it has closed, oldest first."""
    from idemlab.lessons import deletion

    deletions = deletion.Deletions(stack)
    user_id = f"user-{uuid.uuid4().hex[:12]}"
    deletions.seed_user(user_id)
    request_id = deletion.new_request_item(stack, user_id)
    arn = deletions.start(request_id)
    finished = deletion.wait_for(arn)
    if finished["status"] != "SUCCEEDED":
        raise RuntimeError(f"the scheduled deletion {request_id} ended {finished['status']}, wanted SUCCEEDED")
    pages = clients.client("stepfunctions").get_paginator("get_execution_history").paginate(executionArn=arn)
    return sorted((event for page in pages for event in page["events"]), key=lambda event: event["id"])
