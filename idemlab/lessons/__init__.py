"""One module of plumbing per lesson. Each takes the deployed stack the same way: ``stack``
is the Terraform stack's ``lab`` output (docs/DESIGN.md), names by key. A lesson's
notebook and its tests use the same module, so what the notebook shows is what CI checks."""

from __future__ import annotations

import json
import time
from typing import Any, Callable, TypeVar

from idemlab import clients

T = TypeVar("T")


class FunctionFailed(RuntimeError):
    """A function answered an invocation with an error (FunctionError); ``answer`` holds it."""

    def __init__(self, function: str, answer: Any):
        super().__init__(f"{function} failed: {answer}")
        self.answer = answer


def invoke(lambda_, function: str, event: Any) -> Any:
    """Invoke ``function`` synchronously and return its answer; a function error raises FunctionFailed."""
    response = lambda_.invoke(FunctionName=function, Payload=json.dumps(event).encode())
    answer = json.loads(response["Payload"].read() or b"null")
    if response.get("FunctionError"):
        raise FunctionFailed(function, answer)
    return answer


def poll(read: Callable[[], T], seconds: float, every: float, until: Callable[[T], Any] = bool) -> T:
    """``read()`` every ``every`` s until ``until`` holds for its value or ``seconds`` have passed; the last value."""
    deadline = time.monotonic() + seconds
    while not until(value := read()) and time.monotonic() < deadline:
        time.sleep(every)
    return value


def scan(table: str, dynamodb=None, **options) -> list[dict]:
    """Every item of ``table`` (a name) in one consistent scan; ``options`` add a filter or a
    projection. The default client is the resource's, which takes conditions and Python values."""
    dynamodb = dynamodb or clients.resource("dynamodb").meta.client
    pages = dynamodb.get_paginator("scan").paginate(TableName=table, ConsistentRead=True, **options)
    return [item for page in pages for item in page["Items"]]


def queue_depth(url: str, sqs=None) -> int:
    """Messages on a queue, visible or in flight."""
    names = ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
    attributes = (sqs or clients.client("sqs")).get_queue_attributes(QueueUrl=url, AttributeNames=names)["Attributes"]
    return sum(int(attributes[name]) for name in names)
