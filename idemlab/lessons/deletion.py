"""Lesson 3 plumbing: the account-deletion code in-process, and its tables on a bare server.

Tests and the notebooks ``03_claims_and_leases`` and ``04_partial_failures_and_recovery``
import this module, so what a notebook shows is what CI checks.
"""

from __future__ import annotations

import importlib
import sys
import uuid
from dataclasses import dataclass
from types import ModuleType

import boto3
from boto3.dynamodb.conditions import Attr, Key

from idemlab import clients, settings

FUNCTION_DIR = settings.ROOT / "functions" / "account_deletion"

# The table keys of the scenario (docs/DESIGN.md) and their key schema, as the Terraform
# module declares them; used to create private copies on a bare server.
TABLE_KEYS = ("deletion_requests", "user_records", "identities", "email_outbox", "faults")
_KEY_SCHEMA = {
    "deletion_requests": [("deletion_request_id", "S", "HASH")],
    "user_records": [("user_id", "S", "HASH"), ("record_id", "S", "RANGE")],
    "identities": [("user_id", "S", "HASH")],
    "email_outbox": [("idempotency_key", "S", "HASH")],
    "faults": [("fault_key", "S", "HASH")],
}


def import_function_module(name: str) -> ModuleType:
    """A module of the deletion Lambda code (``"deletion_state"``, ``"claim_deletion"``).

    The zip's root is the function folder, whose modules import each other as top-level
    names; the folder goes on ``sys.path`` the same way. Every module name in it starts
    with its own scenario's words, so no other folder shadows it.
    """
    folder = str(FUNCTION_DIR)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    return importlib.import_module(name)


def create_tables(dynamodb_client, prefix: str | None = None) -> dict[str, str]:
    """Create the scenario's tables under a fresh prefix; returns {table key: table name}.

    Same keys and indexes as the Terraform module, so the code under test cannot tell
    the difference; the prefix keeps parallel tests apart on one server.
    """
    prefix = prefix or f"t{uuid.uuid4().hex[:8]}"
    names = {}
    for key in TABLE_KEYS:
        name = f"{prefix}-{key}"
        attributes = {n: t for n, t, _ in _KEY_SCHEMA[key]}
        spec = {
            "TableName": name,
            "BillingMode": "PAY_PER_REQUEST",
            "KeySchema": [{"AttributeName": n, "KeyType": k} for n, _, k in _KEY_SCHEMA[key]],
        }
        if key == "deletion_requests":
            attributes.update(user_id="S", status="S", lease_expires_at="N")
            spec["GlobalSecondaryIndexes"] = [
                _index("by_user", [("user_id", "HASH")]),
                _index("by_status_lease", [("status", "HASH"), ("lease_expires_at", "RANGE")]),
            ]
        spec["AttributeDefinitions"] = [{"AttributeName": n, "AttributeType": t} for n, t in attributes.items()]
        dynamodb_client.create_table(**spec)
        names[key] = name
    return names


def _index(name: str, keys: list[tuple[str, str]]) -> dict:
    return {
        "IndexName": name,
        "KeySchema": [{"AttributeName": n, "KeyType": k} for n, k in keys],
        "Projection": {"ProjectionType": "ALL"},
    }


def table_env(names: dict[str, str]) -> dict[str, str]:
    """The ``<KEY>_TABLE`` environment variables Terraform gives the functions."""
    return {f"{key.upper()}_TABLE": name for key, name in names.items()}


@dataclass
class Names:
    """Where the scenario lives: from the stack's ``lab`` output, or made by a test."""

    tables: dict[str, str]
    bucket: str
    schedule_group: str
    scheduler_role_arn: str
    scheduler_dlq_arn: str
    deletion_dlq_url: str
    state_machine_arn: str

    @classmethod
    def from_outputs(cls, lab: dict) -> "Names":
        return cls(
            tables={key: lab["tables"][key] for key in TABLE_KEYS},
            bucket=lab["buckets"]["user_files"],
            schedule_group=lab["schedule_group"],
            scheduler_role_arn=lab["scheduler_role_arn"],
            scheduler_dlq_arn=lab["queue_arns"]["scheduler_dlq"],
            deletion_dlq_url=lab["queues"]["deletion_dlq"],
            state_machine_arn=lab["state_machines"]["account_deletion"],
        )

    def function_env(self, **limits: int) -> dict[str, str]:
        """The environment Terraform gives the deletion functions (plus ``limits``, e.g.
        ``LEASE_SECONDS=5``), for running them in this process."""
        env = table_env(self.tables)
        env.update(
            USER_FILES_BUCKET=self.bucket,
            SCHEDULE_GROUP=self.schedule_group,
            SCHEDULER_ROLE_ARN=self.scheduler_role_arn,
            SCHEDULER_DLQ_ARN=self.scheduler_dlq_arn,
            DELETION_DLQ_QUEUE_URL=self.deletion_dlq_url,
            ACCOUNT_DELETION_STATE_MACHINE_ARN=self.state_machine_arn,
        )
        env.update({name: str(value) for name, value in limits.items()})
        return env


def create_private_scenario(state_machine_name: str | None = None) -> Names:
    """Everything the deletion functions need except the functions themselves, under a
    fresh prefix on the selected backend, for tests that run without the Terraform stack.

    The state machine is only named (its ARN is derived); the caller creates it.
    """
    prefix = f"t{uuid.uuid4().hex[:8]}"
    tables = create_tables(clients.client("dynamodb"), prefix)
    clients.client("s3").create_bucket(Bucket=f"{prefix}-user-files")
    sqs = clients.client("sqs")
    scheduler_dlq = sqs.create_queue(QueueName=f"{prefix}-scheduler_dlq")["QueueUrl"]
    deletion_dlq = sqs.create_queue(QueueName=f"{prefix}-deletion_dlq")["QueueUrl"]
    clients.client("scheduler").create_schedule_group(Name=f"{prefix}-deletions")
    account = clients.client("sts").get_caller_identity()["Account"]
    machine = state_machine_name or f"{prefix}-account_deletion"
    return Names(
        tables=tables,
        bucket=f"{prefix}-user-files",
        schedule_group=f"{prefix}-deletions",
        scheduler_role_arn=f"arn:aws:iam::{account}:role/{prefix}-scheduler",
        scheduler_dlq_arn=sqs.get_queue_attributes(QueueUrl=scheduler_dlq, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"],
        deletion_dlq_url=deletion_dlq,
        state_machine_arn=f"arn:aws:states:{settings.region()}:{account}:stateMachine:{machine}",
    )


def _dynamodb():
    return boto3.resource("dynamodb", endpoint_url=settings.endpoint_url(), region_name=settings.region())


def seed_user(names: Names, user_id: str, records: int = 3, files: int = 2) -> None:
    """Give ``user_id`` some records, files and an identity, for a deletion to remove."""
    dynamodb = _dynamodb()
    with dynamodb.Table(names.tables["user_records"]).batch_writer() as batch:
        for n in range(records):
            batch.put_item(Item={"user_id": user_id, "record_id": f"r{n:04d}", "body": f"record {n} of {user_id}"})
    dynamodb.Table(names.tables["identities"]).put_item(Item={"user_id": user_id, "email": f"{user_id}@example.com"})
    s3 = clients.client("s3")
    for n in range(files):
        s3.put_object(Bucket=names.bucket, Key=f"{user_id}/file-{n}.txt", Body=f"file {n} of {user_id}".encode())


def leftovers(names: Names, user_id: str) -> dict[str, int]:
    """What is left of ``user_id``: records, files and identities (all 0 once deleted)."""
    dynamodb = _dynamodb()
    records = dynamodb.Table(names.tables["user_records"]).query(
        KeyConditionExpression=Key("user_id").eq(user_id), ConsistentRead=True, Select="COUNT"
    )["Count"]
    identity = dynamodb.Table(names.tables["identities"]).get_item(Key={"user_id": user_id}, ConsistentRead=True)
    files = clients.client("s3").list_objects_v2(Bucket=names.bucket, Prefix=f"{user_id}/").get("KeyCount", 0)
    return {"records": records, "files": files, "identities": int("Item" in identity)}


def goodbyes(names: Names, user_id: str) -> int:
    """Goodbye emails sent to ``user_id`` (the outbox stands for the mail service)."""
    outbox = _dynamodb().Table(names.tables["email_outbox"])
    count, start = 0, None
    while True:
        page = outbox.scan(
            FilterExpression=Attr("user_id").eq(user_id) & Attr("kind").eq("goodbye"),
            Select="COUNT",
            ConsistentRead=True,
            **({"ExclusiveStartKey": start} if start else {}),
        )
        count += page["Count"]
        start = page.get("LastEvaluatedKey")
        if not start:
            return count


def request_status(names: Names, deletion_request_id: str) -> str:
    item = _dynamodb().Table(names.tables["deletion_requests"]).get_item(
        Key={"deletion_request_id": deletion_request_id}, ConsistentRead=True
    ).get("Item")
    return item["status"] if item else "MISSING"


def arm_fault(names: Names, step: str, point: str, deletion_request_id: str, kind: str, times: int = 1) -> str:
    faults = import_function_module("deletion_faults")
    return faults.arm(_dynamodb().Table(names.tables["faults"]), step, point, deletion_request_id, kind, times)


# The in-process twin of the workflow's ASL, for tests and notebook cells that run the
# step functions without Step Functions: the same states, the same Retry and Catch.
STEP_RETRIES = 2  # the ASL's Retry MaxAttempts


def run_workflow_in_process(deletion_request_id: str, owner: str, redrive: bool = False) -> str:
    """Run one attempt; returns how it ended: the claim outcome, or the final status."""
    claimed = import_function_module("claim_deletion").handler(
        {"deletion_request_id": deletion_request_id, "owner": owner, "redrive": redrive}, None
    )
    if claimed["outcome"] != "claimed":
        return claimed["outcome"]
    return run_steps_in_process({key: value for key, value in claimed.items() if key != "outcome"})


def run_steps_in_process(claim: dict) -> str:
    """The steps after a won claim, each retried as the ASL retries it, then the end."""
    errors = import_function_module("deletion_errors")
    steps = import_function_module("deletion_steps")
    complete = import_function_module("complete_deletion")
    point = steps.next_after("claim")
    while point != "complete":
        handler = import_function_module(point).handler
        for attempt in range(STEP_RETRIES + 1):
            try:
                claim = handler(claim, None)
                break
            except errors.ClaimLost:
                return "superseded"
            except errors.DeletionError as exc:
                if attempt == STEP_RETRIES:
                    error = {"Error": type(exc).__name__, "Cause": str(exc)}
                    return complete.handler({**claim, "error": error}, None)["status"]
        point = steps.next_after(point)
    try:
        return complete.handler(claim, None)["status"]
    except errors.ClaimLost:
        return "superseded"


# -- the deployed workflow ------------------------------------------------------------


def invoke(lab: dict, function_key: str, event: dict) -> dict:
    """Invoke a deployed deletion function and return its answer; a function error raises."""
    import json

    answer = clients.client("lambda").invoke(FunctionName=lab["functions"][function_key], Payload=json.dumps(event).encode())
    body = json.loads(answer["Payload"].read() or b"null")
    if answer.get("FunctionError"):
        raise RuntimeError(f"{function_key} failed: {body}")
    return body


def start(names: Names, deletion_request_id: str, execution_name: str | None = None) -> str:
    """Start the workflow for a request, named like the schedule names it unless told."""
    import json

    return clients.client("stepfunctions").start_execution(
        stateMachineArn=names.state_machine_arn,
        name=execution_name or deletion_request_id,
        input=json.dumps({"deletion_request_id": deletion_request_id}),
    )["executionArn"]


def wait_for(execution_arn: str, timeout: float = 120) -> dict:
    """The execution once it stopped running."""
    import time

    sfn = clients.client("stepfunctions")
    deadline = time.monotonic() + timeout
    while True:
        described = sfn.describe_execution(executionArn=execution_arn)
        if described["status"] != "RUNNING":
            return described
        if time.monotonic() > deadline:
            raise TimeoutError(f"{execution_arn} still running after {timeout} s")
        time.sleep(0.2)
