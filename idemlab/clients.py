"""boto3 clients for the selected backend: the one code path of the lab."""

from __future__ import annotations

import os
import time

import boto3
from botocore.config import Config

from idemlab import settings


def endpoint(endpoint_url: str | None = None) -> str | None:
    """``endpoint_url``, else the backend's (None on AWS)."""
    return endpoint_url or settings.endpoint_url()


# Emulators take any key; without one boto3 stops at "Unable to locate credentials". Keys the
# environment names win, as they would in the SDK's own chain.
EMULATOR_KEYS = {"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test"}


def _keys(url: str | None) -> dict[str, str]:
    """The keys a client of the lab passes to boto3: on an emulator, the environment's or the
    dummy ones; on AWS none (the SDK's credential chain decides)."""
    if not url:
        return {}
    return {name.lower(): os.environ.get(name, value) for name, value in EMULATOR_KEYS.items()}


def use_emulator_environment() -> str | None:
    """On an emulator, put the dummy keys and the region into this process's environment,
    where unset, for code that makes its own boto3 clients here (Lambda code a notebook runs
    in process, Powertools' persistence layer, an exercise's check); the endpoint, or None on
    AWS, where it changes nothing. ``lab.connect()`` calls it: a notebook's first cell."""
    url = endpoint()
    if url:
        region = settings.region()
        for name, value in {**EMULATOR_KEYS, "AWS_DEFAULT_REGION": region, "AWS_REGION": region}.items():
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
    return boto3.client(
        service,
        endpoint_url=url,
        region_name=settings.region(),
        config=Config(**options),
        **_keys(url),
    )


def resource(service: str):
    """A boto3 resource (``Table`` and friends) for ``service`` on the selected backend."""
    url = endpoint()
    return boto3.resource(service, endpoint_url=url, region_name=settings.region(), **_keys(url))


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
