"""The boto3 clients of a function, each made on its first use and kept for the warm
environment: creating one costs more than the call it makes, and a module that made one at
import would need credentials and a region before anything asked it for work."""

from __future__ import annotations

import threading
from functools import cache

import boto3

from shared import settings

# boto3's default session is not safe to make clients from in several threads at once
# (boto3 docs, "Multithreading or multiprocessing with clients"); racing first uses take turns.
_making = threading.Lock()


@cache
def _made(kind: str, service: str):
    with _making:
        return getattr(boto3, kind)(service)


def client(service: str):
    """The low-level client of ``service``; boto3 reads AWS_ENDPOINT_URL and the region itself."""
    return _made("client", service)


def dynamodb():
    """The DynamoDB resource (Python values in, Python values out)."""
    return _made("resource", "dynamodb")


def dynamodb_table(key: str):
    """The Table of a design key, named by ``settings.table``: ``dynamodb_table("faults")``."""
    return dynamodb().Table(settings.table(key))
