"""Find deletions whose worker vanished, hand them on, and say how many there were.

Runs on a schedule. Both lookups use the ``by_status_lease`` index (status, then lease
expiry), never a table scan: PROCESSING with an expired lease is stuck; RETRYABLE whose
retry time has come is restarted.
"""

from __future__ import annotations

import json

from botocore.exceptions import ClientError

import deletion_config as config
import deletion_dead_letters as dead_letters
import deletion_state as state
from deletion_errors import DeletionStoreUnavailable


def handler(event, context):
    return run_once()


def run_once(now: float | None = None) -> dict:
    table = config.table("deletion_requests")
    stuck = state.expired_leases(table, now=now)
    moved = {state.Status.RETRYABLE.value: 0, state.Status.FAILED.value: 0}
    for seen in stuck:
        if state.is_last_attempt(seen.attempts, config.max_attempts()):
            dead_letters.send(seen.deletion_request_id, seen.user_id, f"lease of {seen.lease_owner} expired on the last attempt")
        result = state.sweep(table, seen, config.max_attempts(), config.retry_delay_seconds(), now=now)
        if result is not None:
            moved[result.value] += 1
    restarted = [restart(request) for request in state.due_retries(table, now=now)]
    publish_stuck_count(len(stuck))
    return {"stuck": len(stuck), "moved": moved, "restarted": [name for name in restarted if name]}


def execution_name(request: state.Request) -> str:
    # The token counts claims so far and stays put while the request waits, so two
    # sweeps of the same RETRYABLE request ask for the same execution, and Step
    # Functions refuses the second.
    return f"{request.deletion_request_id}-retry-{request.fencing_token}"


def restart(request: state.Request) -> str | None:
    """Start a new attempt; the execution name, or None if that attempt already exists."""
    name = execution_name(request)
    try:
        config.client("stepfunctions").start_execution(
            stateMachineArn=config.state_machine_arn(),
            name=name,
            input=json.dumps({"deletion_request_id": request.deletion_request_id}),
        )
    except ClientError as exc:
        if exc.response["Error"]["Code"] == "ExecutionAlreadyExists":
            return None
        raise DeletionStoreUnavailable(f"restarting {request.deletion_request_id}: {exc.response['Error'].get('Code')}") from exc
    return name


def publish_stuck_count(count: int) -> None:
    """The count behind the stuck-requests alarm; zero too, so the alarm sees a value."""
    datum = {"MetricName": config.optional("STUCK_METRIC_NAME") or config.STUCK_METRIC_NAME, "Value": count, "Unit": "Count"}
    prefix = config.optional("LAB_PREFIX")
    if prefix:
        # The alarm watches the metric of its own deployment, told apart by this dimension.
        datum["Dimensions"] = [{"Name": "Prefix", "Value": prefix}]
    config.client("cloudwatch").put_metric_data(Namespace=config.optional("METRIC_NAMESPACE") or config.METRIC_NAMESPACE, MetricData=[datum])
