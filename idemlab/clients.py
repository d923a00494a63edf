"""boto3 clients for the selected backend: the one code path of the lab."""

from __future__ import annotations

import os
import time

import boto3
from botocore.config import Config

from idemlab import settings


def endpoint(endpoint_url: str | None = None) -> str | None:
    """``endpoint_url``, else the backend's (None on AWS). Emulators take any key, so with an
    endpoint dummy keys are set: without any, boto3 stops at "Unable to locate credentials"."""
    if url := endpoint_url or settings.endpoint_url():
        for name, value in (
            ("AWS_ACCESS_KEY_ID", "test"),
            ("AWS_SECRET_ACCESS_KEY", "test"),
            ("AWS_DEFAULT_REGION", settings.region()),
            ("AWS_REGION", settings.region()),
        ):
            os.environ.setdefault(name, value)
    return url


def client(service: str, endpoint_url: str | None = None, **config: object):
    """A boto3 client for ``service`` on the selected backend.

    With an endpoint override (the emulators), Step Functions gets
    ``inject_host_prefix=False``: botocore would otherwise send ``StartSyncExecution`` to a
    ``sync-`` host name that a loopback endpoint lacks. Without one (AWS) the prefix stays:
    AWS serves ``StartSyncExecution`` only at ``sync-states.<region>.amazonaws.com``.
    """
    url = endpoint(endpoint_url)
    options = {"retries": {"max_attempts": 2, "mode": "standard"}, **config}
    if service == "stepfunctions" and url:
        options.setdefault("inject_host_prefix", False)
    return boto3.client(service, endpoint_url=url, region_name=settings.region(), config=Config(**options))


def resource(service: str):
    """A boto3 resource (``Table`` and friends) for ``service`` on the selected backend."""
    return boto3.resource(service, endpoint_url=endpoint(), region_name=settings.region())


def wait_for_execution(execution_arn: str, timeout: float, poll_seconds: float = 0.1, sfn=None) -> dict:
    """DescribeExecution once the execution has stopped running.

    For Standard executions only: AWS refuses DescribeExecution for an Express execution
    (unless a Map Run started it; Step Functions API reference, DescribeExecution).
    """
    sfn = sfn or client("stepfunctions")
    deadline = time.monotonic() + timeout
    while (described := sfn.describe_execution(executionArn=execution_arn))["status"] == "RUNNING":
        if time.monotonic() > deadline:
            last = sfn.get_execution_history(executionArn=execution_arn, reverseOrder=True, maxResults=1)["events"]
            raise TimeoutError(
                f"{execution_arn} still RUNNING after {timeout:.0f} s; its last event: {last[0] if last else 'none'}"
            )
        time.sleep(poll_seconds)
    return described
