"""Race many clients at one key, round after round, and count the winners.

Clients are threads spread over several processes (as retries arrive from different
Lambda environments), released together by a barrier at the start of every round.
Used by the tests that prove a backend's conditional writes are atomic.
"""

from __future__ import annotations

import multiprocessing
import threading
import uuid
from collections import Counter

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

SCHEDULED, PROCESSING = "SCHEDULED", "PROCESSING"


def _won(refused: str, call, **request) -> bool:
    """Whether the write went through: False when DynamoDB refused it with `refused`."""
    try:
        call(**request)
    except ClientError as exc:
        if exc.response["Error"]["Code"] == refused:
            return False
        raise
    return True


def conditional_put(client, table: str, key: str, contender: str) -> bool:
    return _won(
        "ConditionalCheckFailedException",
        client.put_item,
        TableName=table,
        Item={"pk": {"S": key}, "winner": {"S": contender}},
        ConditionExpression="attribute_not_exists(pk)",
    )


def claim_update(client, table: str, key: str, contender: str) -> bool:
    return _won(
        "ConditionalCheckFailedException",
        client.update_item,
        TableName=table,
        Key={"pk": {"S": key}},
        UpdateExpression="SET #s = :processing, winner = :me",
        ConditionExpression="#s = :scheduled",
        ExpressionAttributeNames={"#s": "status"},
        ExpressionAttributeValues={":processing": {"S": PROCESSING}, ":scheduled": {"S": SCHEDULED}, ":me": {"S": contender}},
    )


def transact_put(client, table: str, key: str, contender: str) -> bool:
    """The guarded item and a second item (the effect) written together, or neither."""
    return _won(
        "TransactionCanceledException",
        client.transact_write_items,
        TransactItems=[
            {"Put": {"TableName": table, "Item": {"pk": {"S": key}, "winner": {"S": contender}}, "ConditionExpression": "attribute_not_exists(pk)"}},
            {"Put": {"TableName": table, "Item": {"pk": {"S": f"{key}#effect#{contender}"}}}},
        ],
    )


OPERATIONS = {"conditional_put": conditional_put, "claim_update": claim_update, "transact_put": transact_put}


def _contend(endpoint_url, operation, table, prefix, rounds, barrier, contender, wins):
    client = boto3.client(
        "dynamodb",
        endpoint_url=endpoint_url,
        region_name="us-east-1",
        aws_access_key_id="test",
        aws_secret_access_key="test",
        config=Config(retries={"max_attempts": 1}, max_pool_connections=2),
    )
    attempt = OPERATIONS[operation]
    for round_no in range(rounds):
        barrier.wait()
        if attempt(client, table, f"{prefix}-{round_no}", contender):
            wins.append(round_no)


def _process_main(endpoint_url, operation, table, prefix, rounds, barrier, threads, process_no, results):
    wins: list[int] = []
    workers = [
        threading.Thread(target=_contend, args=(endpoint_url, operation, table, prefix, rounds, barrier, f"p{process_no}t{t}", wins))
        for t in range(threads)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    results.put(wins)


def race(endpoint_url: str, operation: str, table: str, rounds: int, clients: int, processes: int, prefix: str | None = None) -> Counter:
    """Return how many clients won each round (a Counter: round -> winners)."""
    if clients % processes:
        raise ValueError("clients must divide evenly among processes")
    prefix = prefix or uuid.uuid4().hex[:8]
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(clients)
    results = context.Queue()
    children = [
        context.Process(
            target=_process_main,
            args=(endpoint_url, operation, table, prefix, rounds, barrier, clients // processes, n, results),
        )
        for n in range(processes)
    ]
    for child in children:
        child.start()
    winners: Counter = Counter({round_no: 0 for round_no in range(rounds)})
    for _ in children:
        winners.update(results.get(timeout=600))
    for child in children:
        child.join()
        if child.exitcode != 0:
            raise RuntimeError(f"a racing process failed with exit code {child.exitcode}")
    return winners
