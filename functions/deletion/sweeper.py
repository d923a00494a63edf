"""Find deletions nobody is working on, hand them on, and say how many there were.

Runs on a schedule. Every lookup uses the ``by_status_lease`` index (status, then the
moment the request should have moved by), never a table scan:

- PROCESSING with an expired lease: its worker vanished. It goes back to RETRYABLE
  (FAILED, with a dead letter, on its last attempt) and is restarted in the same sweep.
- RETRYABLE whose retry time has come, and SCHEDULED still unclaimed a grace period
  after it was due (its start died before claiming): restarted, each restart under a
  new execution name, with a time to claim. A request whose restarts all died before
  claiming goes to FAILED with a dead letter, instead of being restarted for ever.

Every request is handled on its own: one that fails is counted and the others are
still handled; the count of stuck requests is published every time, then the sweep
reports its failures by raising. A row that cannot be read as a request (no user id,
say) is one of those failures: it is counted as stuck (nobody can work on it, a human
must look), reported by its id, and the rest of the sweep goes on.
"""

from __future__ import annotations

import json
import sys

from botocore.exceptions import ClientError

from erasure import config, dead_letters, faults, state, sweeps
from erasure.errors import DeletionStoreUnavailableError, SweepIncompleteError
from shared import clients, settings

# Fault hooks: the sweeper can be made to fail on one request (a sweep that fails midway).
SWEEP = "sweep"
RESTART = "restart"


def handler(event, context):
    return run_once(context)


def run_once(context, now: float | None = None) -> dict:
    """One sweep; ``context`` is the invocation's (the fault hooks run out its time)."""
    table = clients.dynamodb_table("deletion_requests")
    max_attempts = config.max_attempts()
    moved = {state.Status.RETRYABLE.value: 0, state.Status.FAILED.value: 0}
    restarted: list[str] = []
    failures: dict[str, str] = {}
    malformed: list = []
    stuck = sweeps.expired_leases(table, now=now, malformed=malformed)
    for seen in stuck:
        try:
            faults.strike(faults.at(SWEEP, faults.BEFORE), seen.deletion_request_id, context)
            dead_letters.send_on_last_attempt(seen, f"lease of {seen.lease_owner} expired on the last attempt")
            # No retry delay: the lease that ran out was the wait, so the request is
            # restarted below in this same sweep, not one sweeper period later.
            result = sweeps.sweep(table, seen, max_attempts, 0, now=now)
            if result is not None:
                moved[result.value] += 1
        except Exception as exc:
            failures[seen.deletion_request_id] = f"{type(exc).__name__}: {exc}"
    overdue = sweeps.overdue_scheduled(table, config.schedule_grace_seconds(), now=now, malformed=malformed)
    waiting = overdue + sweeps.due_retries(table, now=now, malformed=malformed)
    for bad in malformed:
        failures[f"malformed#{len(failures)}"] = f"{type(bad).__name__}: {bad}"
    # Stuck: a worker vanished, a schedule never started one, a restart never claimed, or
    # the row is malformed and nobody can work on it.
    restarted_unclaimed = sum(1 for r in waiting if r.status is state.Status.RETRYABLE and r.unclaimed_restarts)
    stuck_count = len(stuck) + len(overdue) + restarted_unclaimed + len(malformed)
    for seen in waiting:
        try:
            faults.strike(faults.at(RESTART, faults.BEFORE), seen.deletion_request_id, context)
            if seen.unclaimed_restarts >= max_attempts:
                if give_up(table, seen):
                    moved[state.Status.FAILED.value] += 1
                continue
            name = restart(table, seen, now)
            if name:
                restarted.append(name)
        except Exception as exc:
            failures[seen.deletion_request_id] = f"{type(exc).__name__}: {exc}"
    publish_stuck_count(stuck_count)
    result = {
        "stuck": stuck_count,
        "moved": moved,
        "restarted": restarted,
        "failed": failures,
        "malformed": len(malformed),
    }
    if failures:
        print(json.dumps(result), file=sys.stderr, flush=True)
        raise SweepIncompleteError(f"{len(failures)} requests not handled: {failures}")
    return result


def execution_name(request: state.Request, restart_number: int) -> str:
    # Numbered by restarts, which grow with every restart (not only with every claim),
    # so a restart that died before claiming is followed by one under a new name.
    return f"{request.deletion_request_id}-restart-{restart_number}"


def give_up(table, seen: state.Request) -> bool:
    """Every restart since the last claim died before claiming: FAILED, with a dead letter
    (sent first, so a crash in between leaves a message too many, never none)."""
    reason = f"{seen.unclaimed_restarts} restarts ended before claiming"
    dead_letters.send(seen.deletion_request_id, seen.user_id, reason)
    return sweeps.fail_unclaimed(table, seen, reason)


def restart(table, seen: state.Request, now: float | None = None) -> str | None:
    """Start a new attempt; its execution name, or None when another sweep or a claim
    got there first."""
    # Marked first: a crash between the mark and the start leaves a restart that never
    # claims, which the next sweep after the time to claim restarts again.
    number = sweeps.mark_restart(table, seen, config.lease_seconds(), now=now)
    if number is None:
        return None
    name = execution_name(seen, number)
    try:
        clients.client("stepfunctions").start_execution(
            stateMachineArn=config.state_machine_arn(),
            name=name,
            input=json.dumps({"deletion_request_id": seen.deletion_request_id}),
        )
    except ClientError as exc:
        if exc.response["Error"]["Code"] == "ExecutionAlreadyExists":
            return None  # a sweep that crashed after starting it; it runs already
        raise DeletionStoreUnavailableError(
            f"restarting {seen.deletion_request_id}: {exc.response['Error'].get('Code')}"
        ) from exc
    return name


def publish_stuck_count(count: int) -> None:
    """The count behind the stuck-requests alarm; zero too, so the alarm sees a value."""
    datum = {
        "MetricName": settings.optional("STUCK_METRIC_NAME") or config.STUCK_METRIC_NAME,
        "Value": count,
        "Unit": "Count",
    }
    prefix = settings.optional("LAB_PREFIX")
    if prefix:
        # The alarm watches the metric of its own deployment, told apart by this dimension.
        datum["Dimensions"] = [{"Name": "Prefix", "Value": prefix}]
    clients.client("cloudwatch").put_metric_data(
        Namespace=settings.optional("METRIC_NAMESPACE") or config.METRIC_NAMESPACE, MetricData=[datum]
    )
