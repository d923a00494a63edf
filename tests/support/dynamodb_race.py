"""Race many clients at one key, round after round, and count the winners.

Clients are threads spread over several processes (as retries arrive from different
Lambda environments), released together by a barrier at the start of every round.
Used by the tests that prove a backend's conditional writes are atomic, and only by
them.
"""

from __future__ import annotations

import functools
import multiprocessing
import uuid
from collections import Counter

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

from idemlab.barrier import settled

SCHEDULED, PROCESSING = "SCHEDULED", "PROCESSING"


def _calls(table: str, key: str, contender: str) -> dict[str, tuple[str, str, dict]]:
    """Each operation as (client method, the error code of a refused write, request)."""
    item = {"pk": {"S": key}, "winner": {"S": contender}}
    refused, absent = "ConditionalCheckFailedException", "attribute_not_exists(pk)"
    return {
        "conditional_put": ("put_item", refused, {"TableName": table, "Item": item, "ConditionExpression": absent}),
        "claim_update": (
            "update_item",
            refused,
            {
                "TableName": table,
                "Key": {"pk": {"S": key}},
                "UpdateExpression": "SET #s = :processing, winner = :me",
                "ConditionExpression": "#s = :scheduled",
                "ExpressionAttributeNames": {"#s": "status"},
                "ExpressionAttributeValues": {
                    ":processing": {"S": PROCESSING},
                    ":scheduled": {"S": SCHEDULED},
                    ":me": {"S": contender},
                },
            },
        ),
        # The guarded item and a second item (the effect) written together, or neither.
        "transact_put": (
            "transact_write_items",
            "TransactionCanceledException",
            {
                "TransactItems": [
                    {"Put": {"TableName": table, "Item": item, "ConditionExpression": absent}},
                    {"Put": {"TableName": table, "Item": {"pk": {"S": f"{key}#effect#{contender}"}}}},
                ]
            },
        ),
    }


def _contend(endpoint_url, operation, table, prefix, rounds, barrier, contender, wins):
    client = boto3.client(
        "dynamodb",
        endpoint_url=endpoint_url,
        region_name="us-east-1",
        aws_access_key_id="test",
        aws_secret_access_key="test",
        config=Config(retries={"max_attempts": 1}, max_pool_connections=2),
    )
    for round_no in range(rounds):
        method, refused, request = _calls(table, f"{prefix}-{round_no}", contender)[operation]
        barrier.wait()
        try:
            getattr(client, method)(**request)
            wins.append(round_no)
        except ClientError as exc:
            if exc.response["Error"]["Code"] != refused:
                barrier.abort()  # the others would wait for this client forever
                raise


def _process_main(endpoint_url, operation, table, prefix, rounds, barrier, threads, process_no, results):
    wins: list[int] = []
    contend = functools.partial(_contend, endpoint_url, operation, table, prefix, rounds, barrier)
    answers = settled([functools.partial(contend, f"p{process_no}t{t}", wins) for t in range(threads)])
    results.put((wins, [repr(answer) for answer in answers if isinstance(answer, Exception)]))


def race(
    endpoint_url: str, operation: str, table: str, rounds: int, clients: int, processes: int, prefix: str | None = None
) -> Counter:
    """Return how many clients won each round (a Counter: round -> winners)."""
    if operation not in _calls(table, "", ""):
        raise ValueError(f"unknown operation {operation!r}; use one of {', '.join(_calls(table, '', ''))}")
    if clients % processes:
        raise ValueError("clients must divide evenly among processes")
    prefix = prefix or uuid.uuid4().hex[:8]
    context = multiprocessing.get_context("spawn")
    barrier, results = context.Barrier(clients), context.Queue()
    children = [
        context.Process(
            target=_process_main,
            args=(endpoint_url, operation, table, prefix, rounds, barrier, clients // processes, n, results),
        )
        for n in range(processes)
    ]
    for child in children:
        child.start()
    winners: Counter = Counter(dict.fromkeys(range(rounds), 0))
    errors = []
    for _ in children:
        wins, failed = results.get(timeout=600)
        winners.update(wins)
        errors += failed
    for child in children:
        child.join()
        if child.exitcode != 0:
            raise RuntimeError(f"a racing process failed with exit code {child.exitcode}")
    if errors:
        raise RuntimeError(f"{len(errors)} racing clients failed, the first with {errors[0]}")
    return winners
