"""A private copy of lesson 09's resources on the session's backend, in the shape of the
``lab`` output, so ``idemlab.lessons.durable.Durables`` takes it unchanged.

The durable functions, the dispatcher and the queues are created by the lesson module
(``durable.create_functions``, ``durable.create_queues``: what the notebook's ``deploy``
creates beside a stack); their tables take the key schemas of ``tables.tf``, read through
``idemlab.module_spec``.
"""

from __future__ import annotations

import uuid

from idemlab import clients, module_spec
from idemlab.lessons import durable

TABLES = ("faults", "email_outbox", "user_records", "identities")


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
    """Tables, bucket, the durable functions, the dispatcher and their queues, all new; the
    ``lab``-shaped map of them."""
    suffix = uuid.uuid4().hex[:8]
    specs = module_spec.default("tables")
    tables = {key: f"durable-{key}-{suffix}" for key in TABLES}
    for key, name in tables.items():
        create_table(name, specs[key])
    bucket = f"durable-files-{suffix}"
    clients.client("s3").create_bucket(Bucket=bucket)
    environment = {f"{key.upper()}_TABLE": name for key, name in tables.items()}
    environment["USER_FILES_BUCKET"] = bucket
    functions = durable.create_functions(lambda_role, environment, f"durable-{suffix}")
    queues = durable.create_queues(functions, f"durable-{suffix}")
    return {"tables": tables, "functions": functions, "buckets": {"user_files": bucket}, "queues": queues}
