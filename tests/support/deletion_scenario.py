"""Private copies of the deletion scenario, and its workflow run in this process: for the
tests of lessons 3 and 4 only (the notebooks use the deployed stack through
``idemlab.lessons.deletion.Deletions``).

A private scenario has the shape of the stack's ``lab`` output, so ``Deletions`` works
on it unchanged. Its tables copy the key schemas and indexes of the deployed tables
(``describe_table``): Terraform's ``tables`` map stays their one owner. Its functions'
environment is the deployed functions' own, with every deployed name swapped for the
private one.
"""

from __future__ import annotations

import uuid

from idemlab import clients, module_spec, settings
from idemlab.lessons.deletion import import_function_module
from support import invocation

TABLE_KEYS = ("deletion_requests", "user_records", "identities", "email_outbox", "faults")
# Functions whose environments together name everything the deletion code reads.
_ENVIRONMENT_OF = ("complete_deletion", "naive_deletion_worker", "request_deletion", "sweeper")


def copy_tables(stack: dict, prefix: str | None = None) -> dict[str, str]:
    """New empty tables with the keys and indexes of the stack's deletion tables, under a
    fresh prefix; {table key: table name}."""
    prefix = prefix or f"t{uuid.uuid4().hex[:8]}"
    dynamodb = clients.client("dynamodb")
    names = {}
    for key in TABLE_KEYS:
        deployed = dynamodb.describe_table(TableName=stack["tables"][key])["Table"]
        spec = {
            "TableName": f"{prefix}-{key}",
            "BillingMode": "PAY_PER_REQUEST",
            "KeySchema": deployed["KeySchema"],
            "AttributeDefinitions": deployed["AttributeDefinitions"],
        }
        if deployed.get("GlobalSecondaryIndexes"):
            spec["GlobalSecondaryIndexes"] = [
                {"IndexName": g["IndexName"], "KeySchema": g["KeySchema"], "Projection": g["Projection"]}
                for g in deployed["GlobalSecondaryIndexes"]
            ]
        dynamodb.create_table(**spec)
        names[key] = spec["TableName"]
    return names


def private_scenario(stack: dict) -> dict:
    """Everything the deletion functions need except the functions, under a fresh prefix,
    shaped like the stack's ``lab`` output. The state machine is only named (its ARN is
    derived); the caller creates it. ``environment`` is what the functions get."""
    prefix = f"t{uuid.uuid4().hex[:8]}"
    sqs = clients.client("sqs")
    bucket, group = f"{prefix}-user-files", f"{prefix}-deletions"
    clients.client("s3").create_bucket(Bucket=bucket)
    clients.client("scheduler").create_schedule_group(Name=group)
    dlq = sqs.create_queue(QueueName=f"{prefix}-deletion_dlq")["QueueUrl"]
    scheduler_dlq = sqs.create_queue(QueueName=f"{prefix}-scheduler_dlq")["QueueUrl"]
    account = clients.client("sts").get_caller_identity()["Account"]
    private = {
        "prefix": prefix,
        "tables": copy_tables(stack, prefix),
        "buckets": {"user_files": bucket},
        "schedule_group": group,
        "queues": {"deletion_dlq": dlq, "scheduler_dlq": scheduler_dlq},
        "queue_arns": {
            name: _queue_arn(url) for name, url in (("deletion_dlq", dlq), ("scheduler_dlq", scheduler_dlq))
        },
        "state_machines": {
            "account_deletion": f"arn:aws:states:{settings.region()}:{account}:stateMachine:{prefix}-account_deletion"
        },
        "functions": {},
    }
    private["environment"] = _environment(stack, private)
    return private


def _queue_arn(url: str) -> str:
    return clients.client("sqs").get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]


def _environment(stack: dict, private: dict) -> dict[str, str]:
    """The deployed deletion functions' environment, pointed at the private scenario."""
    swap = {stack["tables"][key]: name for key, name in private["tables"].items()}
    swap[stack["buckets"]["user_files"]] = private["buckets"]["user_files"]
    swap[stack["schedule_group"]] = private["schedule_group"]
    swap[stack["state_machines"]["account_deletion"]] = private["state_machines"]["account_deletion"]
    for name in ("deletion_dlq", "scheduler_dlq"):
        swap[stack["queues"][name]] = private["queues"][name]
        swap[stack["queue_arns"][name]] = private["queue_arns"][name]
    lam, env = clients.client("lambda"), {}
    for function in _ENVIRONMENT_OF:
        variables = lam.get_function_configuration(FunctionName=stack["functions"][function])["Environment"][
            "Variables"
        ]
        env.update({name: swap.get(value, value) for name, value in variables.items()})
    # The sweeper publishes its metric per deployment; a private one must not add to the stack's.
    env.pop("LAB_PREFIX", None)
    return env


# -- the workflow, run in this process -------------------------------------------------
# The same states as account_deletion.asl.json: the claim, then erasure.state.STEPS in
# order (each retried as the ASL's Retry says), then the completion; a step that fails
# past its retries goes to the completion with the error, as the ASL's Catch does.


def step_retries() -> int:
    """How many times the ASL retries a failed deletion step (its States.ALL Retry)."""
    asl = module_spec.workflows()["account_deletion"]
    return next(
        r["MaxAttempts"] for r in asl["States"]["DeleteIdentity"]["Retry"] if r["ErrorEquals"] == ["States.ALL"]
    )


def run_workflow_in_process(
    deletion_request_id: str, owner: str, redrive: bool = False, timeout_seconds: float | None = None
) -> str:
    """Run one attempt; returns how it ended: the claim outcome, or the final status.
    Each function runs with its own timeout from functions.tf, or ``timeout_seconds``."""
    claimed = _invoke(
        "claim_deletion",
        {"deletion_request_id": deletion_request_id, "owner": owner, "redrive": redrive},
        timeout_seconds,
    )
    if claimed["outcome"] != "claimed":
        return claimed["outcome"]
    return run_steps_in_process({key: value for key, value in claimed.items() if key != "outcome"}, timeout_seconds)


def run_steps_in_process(claim: dict, timeout_seconds: float | None = None) -> str:
    """The steps after a won claim, each retried as the ASL retries it, then the end."""
    errors, steps = import_function_module("erasure.errors"), import_function_module("erasure.steps")
    state = import_function_module("erasure.state")
    retries = step_retries()
    for step in state.STEPS:
        while True:  # a paged step runs again while it says there is more to do
            for attempt in range(retries + 1):
                try:
                    claim = _invoke(step, claim, timeout_seconds)
                    break
                except errors.ClaimLostError:
                    return "superseded"
                except errors.DeletionError as exc:
                    if attempt == retries:
                        failed = {**claim, "error": {"Error": type(exc).__name__, "Cause": str(exc)}}
                        return _invoke("complete_deletion", failed, timeout_seconds)["status"]
            if not claim.get(steps.MORE_TO_DO):
                break
    try:
        return _invoke("complete_deletion", claim, timeout_seconds)["status"]
    except errors.ClaimLostError:
        return "superseded"


def _invoke(function: str, event: dict, timeout_seconds: float | None):
    """One invocation of a deletion function (module and key alike), as Lambda gives it its context."""
    timeout = timeout_seconds or float(module_spec.function(function)["timeout"])
    return invocation.invoke(import_function_module(function).handler, event, timeout)


def sweep_in_process(now: float | None = None) -> dict:
    """One pass of the sweeper (``sweeper.run_once``), with a context of its timeout in functions.tf."""
    context = invocation.InvocationContext(float(module_spec.function("sweeper")["timeout"]))
    return import_function_module("sweeper").run_once(context, now=now)
