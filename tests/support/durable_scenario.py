"""A private copy of lesson 09's resources on the session's backend, in the shape of the
``lab`` output, so ``idemlab.lessons.durable.Durables`` takes it unchanged.

The durable functions are created here with boto3 (``DurableConfig`` is set only when a
function is created), from the lesson's own zip (``idemlab.build``); their tables take the
key schemas of ``tables.tf``, read through ``idemlab.module_spec``.
"""

from __future__ import annotations

import uuid

from idemlab import build, clients, module_spec
from idemlab.lessons.durable import KINDS

TABLES = ("faults", "email_outbox", "user_records", "identities")
# Long enough for a cold worker to import boto3 and the SDK on a loaded runner; the crash
# after the send waits it out, so no longer than that.
FUNCTION_TIMEOUT_SECONDS = 20
EXECUTION_TIMEOUT_SECONDS = 300
RETENTION_DAYS = 1


def create_table(name: str, spec: dict) -> None:
    keys = [("hash_key", "HASH"), ("range_key", "RANGE")]
    present = [(spec[field], kind) for field, kind in keys if field in spec]
    clients.client("dynamodb").create_table(
        TableName=name,
        KeySchema=[{"AttributeName": attribute, "KeyType": kind} for attribute, kind in present],
        AttributeDefinitions=[{"AttributeName": attribute, "AttributeType": "S"} for attribute, _ in present],
        BillingMode="PAY_PER_REQUEST",
    )


def private_stack(lambda_role: str) -> dict:
    """Tables, bucket, the durable functions and a queue mapped to ``erase_from_queue``, all
    new; the ``lab``-shaped map of them."""
    suffix = uuid.uuid4().hex[:8]
    specs = module_spec.default("tables")
    tables = {key: f"durable-{key}-{suffix}" for key in TABLES}
    for key, name in tables.items():
        create_table(name, specs[key])
    bucket = f"durable-files-{suffix}"
    clients.client("s3").create_bucket(Bucket=bucket)
    artifact = next(a for a in build.build_all() if a.lesson == "durable")
    code = artifact.path.read_bytes()
    environment = {f"{key.upper()}_TABLE": name for key, name in tables.items()}
    environment["USER_FILES_BUCKET"] = bucket
    functions = {}
    for kind in KINDS:
        name = f"{kind}-{suffix}"
        clients.client("lambda").create_function(
            FunctionName=name,
            Runtime="python3.12",
            Role=lambda_role,
            Handler=f"{kind}.handler",
            Code={"ZipFile": code},
            Timeout=FUNCTION_TIMEOUT_SECONDS,
            Environment={"Variables": environment},
            DurableConfig={"ExecutionTimeout": EXECUTION_TIMEOUT_SECONDS, "RetentionPeriodInDays": RETENTION_DAYS},
        )
        functions[kind] = name
    queue = clients.client("sqs").create_queue(QueueName=f"durable-deletions-{suffix}")["QueueUrl"]
    queue_arn = clients.client("sqs").get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])
    clients.client("lambda").create_event_source_mapping(
        FunctionName=functions["erase_from_queue"],
        EventSourceArn=queue_arn["Attributes"]["QueueArn"],
        BatchSize=1,
    )
    return {"tables": tables, "functions": functions, "buckets": {"user_files": bucket}, "queues": {"deletions": queue}}
