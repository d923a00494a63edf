"""What the sweeper finds and does: requests whose lease expired, retries that are due,
schedules that never started, each found on the ``by_status_lease`` index (no scan), and
the conditional writes that move them on only if they are still as the sweeper saw them.
"""

from __future__ import annotations

from boto3.dynamodb.conditions import Attr, Key
from botocore.exceptions import ClientError

from erasure.claims import give_back, is_last_attempt
from erasure.errors import MalformedRequestError
from erasure.state import (
    BY_STATUS_LEASE,
    Request,
    Status,
    allowed_from,
    condition_failed,
    now_seconds,
    store_unavailable,
)


def expired_leases(table, now: float | None = None, malformed: list | None = None) -> list[Request]:
    """PROCESSING requests whose lease ran out, from the index (no table scan).

    ``malformed``: a list to which the rows that cannot be read as a request are added
    (as MalformedRequestError), instead of one such row failing the whole query.
    """
    return _query_status_before(table, Status.PROCESSING, now_seconds(now), malformed)


def due_retries(table, now: float | None = None, malformed: list | None = None) -> list[Request]:
    """RETRYABLE requests whose retry time has come, from the same index."""
    return _query_status_before(table, Status.RETRYABLE, now_seconds(now) + 1, malformed)


def overdue_scheduled(
    table, grace_seconds: int, now: float | None = None, malformed: list | None = None
) -> list[Request]:
    """SCHEDULED requests still unclaimed ``grace_seconds`` after they were due (or after
    their last restart's time to claim): their start failed before it could claim."""
    return _query_status_before(table, Status.SCHEDULED, now_seconds(now) - int(grace_seconds), malformed)


def _as_seen(seen: Request):
    """The request is still exactly where the sweeper saw it waiting."""
    restarts = Attr("restarts").eq(seen.restarts)
    if seen.restarts == 0:
        restarts = restarts | Attr("restarts").not_exists()
    return Attr("status").eq(seen.status.value) & Attr("lease_expires_at").eq(seen.lease_expires_at) & restarts


def mark_restart(table, seen: Request, claim_within_seconds: int, now: float | None = None) -> int | None:
    """Count one more restart of a waiting request and give it ``claim_within_seconds``
    to be claimed; the restart's number (it names the execution), or None when another
    sweep or a claim got there first.

    The number changes with every restart, not with every claim, so a restart that dies
    before it claims is followed by one under a new name instead of colliding with
    ExecutionAlreadyExists for ever.
    """
    update = {
        "Key": {"deletion_request_id": seen.deletion_request_id},
        "UpdateExpression": (
            "SET restarts = if_not_exists(restarts, :zero) + :one, "
            "unclaimed_restarts = if_not_exists(unclaimed_restarts, :zero) + :one, lease_expires_at = :until"
        ),
        "ConditionExpression": _as_seen(seen),
        "ExpressionAttributeValues": {":zero": 0, ":one": 1, ":until": now_seconds(now) + int(claim_within_seconds)},
        "ReturnValues": "ALL_NEW",
    }
    new = _update_unless_moved(table, update, f"marking a restart of {seen.deletion_request_id}")
    if new is None:
        return None
    return int(new["restarts"])


def fail_unclaimed(table, seen: Request, error: str) -> bool:
    """A waiting request whose restarts all died before claiming: FAILED (the caller has
    put it on the dead-letter queue). False when it moved on meanwhile."""
    update = {
        "Key": {"deletion_request_id": seen.deletion_request_id},
        "UpdateExpression": "SET #status = :failed, last_error = :error REMOVE lease_expires_at, lease_owner",
        "ConditionExpression": _as_seen(seen) & allowed_from("fail_unclaimed"),
        "ExpressionAttributeNames": {"#status": "status"},
        "ExpressionAttributeValues": {":failed": Status.FAILED.value, ":error": error[:1000]},
    }
    return _update_unless_moved(table, update, f"failing {seen.deletion_request_id}") is not None


def _query_status_before(table, status: Status, before: int, malformed: list | None = None) -> list[Request]:
    found, start = [], None
    while True:
        page_args = {"ExclusiveStartKey": start} if start else {}
        try:
            page = table.query(
                IndexName=BY_STATUS_LEASE,
                KeyConditionExpression=Key("status").eq(status.value) & Key("lease_expires_at").lt(before),
                **page_args,
            )
        except ClientError as exc:
            raise store_unavailable(exc, f"querying {status} on {BY_STATUS_LEASE}") from exc
        for item in page.get("Items", []):
            try:
                found.append(Request.from_item(item))
            except MalformedRequestError as exc:
                if malformed is None:
                    raise
                malformed.append(exc)  # one bad row must not hide the others from the caller
        start = page.get("LastEvaluatedKey")
        if not start:
            return found


def sweep(
    table, seen: Request, max_attempts: int, retry_delay_seconds: int = 0, now: float | None = None
) -> Status | None:
    """Move a request whose lease expired to RETRYABLE (FAILED when out of attempts).

    Conditional on the token the sweeper saw, so a claim that lands between the index
    query and this write is left alone. None when the request moved on meanwhile.
    """
    t = now_seconds(now)
    out_of_attempts = is_last_attempt(seen.attempts, max_attempts)
    still_as_seen = (
        allowed_from("sweep") & Attr("fencing_token").eq(seen.fencing_token) & Attr("lease_expires_at").lt(t)
    )
    update = {
        "Key": {"deletion_request_id": seen.deletion_request_id},
        "ConditionExpression": still_as_seen,
        **give_back(out_of_attempts, f"lease of {seen.lease_owner} expired", t + int(retry_delay_seconds)),
    }
    if _update_unless_moved(table, update, f"sweeping {seen.deletion_request_id}") is None:
        return None
    return Status.FAILED if out_of_attempts else Status.RETRYABLE


def _update_unless_moved(table, update: dict, what: str) -> dict | None:
    """A write of the sweeper's: the new attributes (empty unless asked for), or None when
    its condition failed because the request moved on since it was read."""
    try:
        return table.update_item(**update).get("Attributes", {})
    except ClientError as exc:
        if condition_failed(exc):
            return None
        raise store_unavailable(exc, what) from exc
