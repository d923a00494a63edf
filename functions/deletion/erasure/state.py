"""A deletion request and its states: the status table, the stored item, and the user's
own writes (create, cancel).

Every write to the ``deletion_requests`` table goes through this module, the claims
(``erasure.claims``: claims, leases, fencing tokens, progress) or the sweeper's
(``erasure.sweeps``), and every one of them is a single conditional write, so DynamoDB
decides each race in one place. Each takes the statuses it may start from out of
``TRANSITIONS``, here. One job per function; the handlers only choose which of them to call.

Item shape: ``deletion_request_id``, ``user_id``, ``status``, ``due_at``, and while a
worker holds it ``lease_owner``, ``lease_expires_at`` (epoch seconds; the range key of
the ``by_status_lease`` index), ``fencing_token`` (grows by one with every claim),
``attempts`` (claims so far), ``steps_done`` (string set).

While a request waits (SCHEDULED, RETRYABLE) ``lease_expires_at`` holds the moment it
should have been claimed by: a SCHEDULED request its due time, a RETRYABLE one its retry
time, and after the sweeper restarted it, the end of the restart's time to claim. So one
index query finds every request that is overdue, whatever it waits for. ``restarts``
counts the sweeper's restarts (it names their executions), ``unclaimed_restarts`` those
since the last claim; ``delay_seconds`` is what the caller asked for (a repeat with
another delay is refused); ``goodbye_address`` is the address captured before the
identity that holds it is deleted, and removed on completion.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from enum import StrEnum
from typing import NamedTuple

from boto3.dynamodb.conditions import Attr
from boto3.dynamodb.types import TypeDeserializer
from botocore.exceptions import ClientError

from erasure.errors import (
    DeletionStoreUnavailableError,
    MalformedRequestError,
    NotYourRequestError,
    UnknownDeletionRequestError,
    UnknownRecoveryPointError,
)


class Status(StrEnum):
    SCHEDULED = "SCHEDULED"  # waiting for its schedule to fire
    PROCESSING = "PROCESSING"  # claimed: one worker holds a lease
    COMPLETED = "COMPLETED"  # every step done; final
    RETRYABLE = "RETRYABLE"  # a worker failed or vanished; may be claimed again
    FAILED = "FAILED"  # out of attempts; a message waits on the dead-letter queue
    CANCELLED = "CANCELLED"  # the user changed their mind before it started; final


class Transition(NamedTuple):
    source: Status
    target: Status
    by: str  # the write that makes it: a function here, in erasure.claims or in erasure.sweeps


# Every status change a write to the table makes, and the one place they are written
# down. Each conditional write takes the statuses it may start from out of this table
# (``_sources``), so a change here changes what the code allows, and the lesson's state
# diagram (idemlab.pictures.request_states) is drawn from the same rows.
TRANSITIONS = (
    Transition(Status.SCHEDULED, Status.PROCESSING, "claim"),
    Transition(Status.RETRYABLE, Status.PROCESSING, "claim"),
    Transition(Status.PROCESSING, Status.PROCESSING, "claim_after_lease_expired"),
    Transition(Status.PROCESSING, Status.PROCESSING, "claim_again"),
    Transition(Status.FAILED, Status.PROCESSING, "claim_redriven"),
    Transition(Status.SCHEDULED, Status.CANCELLED, "cancel"),
    Transition(Status.PROCESSING, Status.COMPLETED, "complete"),
    Transition(Status.PROCESSING, Status.RETRYABLE, "release_after_failure"),
    Transition(Status.PROCESSING, Status.FAILED, "release_after_failure"),
    Transition(Status.PROCESSING, Status.RETRYABLE, "sweep"),
    Transition(Status.PROCESSING, Status.FAILED, "sweep"),
    Transition(Status.SCHEDULED, Status.FAILED, "fail_unclaimed"),
    Transition(Status.RETRYABLE, Status.FAILED, "fail_unclaimed"),
)


def _sources(by: str) -> list[str]:
    """The statuses the write ``by`` may start from, as stored."""
    found = list(dict.fromkeys(t.source.value for t in TRANSITIONS if t.by == by))
    if not found:
        raise UnknownRecoveryPointError(f"bug: no transition is made by {by!r}")
    return found


def allowed_from(by: str):
    """The condition that the request is in a status ``by`` may move it from."""
    sources = _sources(by)
    return Attr("status").eq(sources[0]) if len(sources) == 1 else Attr("status").is_in(sources)


# The steps that record progress, in workflow order: the one place the order is written.
# Completion requires all of them; the naive worker runs them in this order, and a test
# holds the workflow's ASL (account_deletion.asl.json) to it.
STEPS = ("delete_records", "delete_files", "delete_identity", "send_goodbye")


BY_STATUS_LEASE = "by_status_lease"


BY_USER = "by_user"


@dataclass(frozen=True)
class Request:
    """A deletion request as read from the table."""

    deletion_request_id: str
    user_id: str
    status: Status
    due_at: int
    fencing_token: int = 0
    attempts: int = 0
    lease_owner: str | None = None
    lease_expires_at: int | None = None
    steps_done: frozenset[str] = frozenset()
    restarts: int = 0
    unclaimed_restarts: int = 0
    delay_seconds: int | None = None
    goodbye_address: str | None = None

    @classmethod
    def from_item(cls, item: dict) -> Request:
        status = item.get("status")
        if status not in Status.__members__:
            raise UnknownRecoveryPointError(f"bug: unknown status {status!r} on {item.get('deletion_request_id')}")
        for name in ("deletion_request_id", "user_id"):
            if not isinstance(item.get(name), str) or not item[name]:
                raise MalformedRequestError(
                    f"{item.get('deletion_request_id')!r}: the stored request has no {name} ({item.get(name)!r})"
                )
        lease = item.get("lease_expires_at")
        return cls(
            deletion_request_id=item["deletion_request_id"],
            user_id=item["user_id"],
            status=Status(status),
            due_at=int(item.get("due_at", 0)),
            fencing_token=int(item.get("fencing_token", 0)),
            attempts=int(item.get("attempts", 0)),
            lease_owner=item.get("lease_owner"),
            lease_expires_at=None if lease is None else int(lease),
            steps_done=frozenset(item.get("steps_done", ())),
            restarts=int(item.get("restarts", 0)),
            unclaimed_restarts=int(item.get("unclaimed_restarts", 0)),
            delay_seconds=None if item.get("delay_seconds") is None else int(item["delay_seconds"]),
            goodbye_address=item.get("goodbye_address"),
        )

    @property
    def is_final(self) -> bool:
        """COMPLETED or CANCELLED: nothing will happen to it any more."""
        return self.status in (Status.COMPLETED, Status.CANCELLED)


def now_seconds(now: float | None) -> int:
    return int(time.time() if now is None else now)


def condition_failed(exc: ClientError) -> bool:
    return exc.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException"


def old_item(exc: ClientError) -> dict | None:
    """The item as it was when the condition failed (ReturnValuesOnConditionCheckFailure)."""
    raw = exc.response.get("Item")
    if not raw:
        return None
    deserializer = TypeDeserializer()
    return {name: deserializer.deserialize(value) for name, value in raw.items()}


def store_unavailable(exc: ClientError, what: str) -> DeletionStoreUnavailableError:
    return DeletionStoreUnavailableError(f"{what}: {exc.response.get('Error', {}).get('Code')}")


def read(table, deletion_request_id: str) -> Request:
    """The request as it is now (strongly consistent), or UnknownDeletionRequestError."""
    try:
        item = table.get_item(Key={"deletion_request_id": deletion_request_id}, ConsistentRead=True).get("Item")
    except ClientError as exc:
        raise store_unavailable(exc, f"reading {deletion_request_id}") from exc
    if item is None:
        raise UnknownDeletionRequestError(deletion_request_id)
    return Request.from_item(item)


def create(
    table,
    deletion_request_id: str,
    user_id: str,
    due_at: int,
    now: float | None = None,
    delay_seconds: int | None = None,
) -> tuple[Request, bool]:
    """Store a new SCHEDULED request; if the id exists, return the stored one. (request, created).

    Its ``lease_expires_at`` is its due time: a request still SCHEDULED well after it
    (the schedule's start failed before claiming) is found by the sweeper on the index.
    """
    item = {
        "deletion_request_id": deletion_request_id,
        "user_id": user_id,
        "status": Status.SCHEDULED.value,
        "due_at": int(due_at),
        "lease_expires_at": int(due_at),
        "created_at": now_seconds(now),
        "fencing_token": 0,
        "attempts": 0,
        "restarts": 0,
        "unclaimed_restarts": 0,
    }
    if delay_seconds is not None:
        item["delay_seconds"] = int(delay_seconds)
    try:
        table.put_item(
            Item=item,
            ConditionExpression=Attr("deletion_request_id").not_exists(),
            ReturnValuesOnConditionCheckFailure="ALL_OLD",
        )
    except ClientError as exc:
        if not condition_failed(exc):
            raise store_unavailable(exc, f"creating {deletion_request_id}") from exc
        old = old_item(exc)
        return (Request.from_item(old) if old else read(table, deletion_request_id)), False
    return Request.from_item(item), True


def write_or_read_old(table, deletion_request_id: str, update: dict, what: str) -> tuple[Request, bool]:
    """(the request after the write, True), or, when its condition refused it, (the
    request as it was then, False): a loser learns what it lost to from the same call."""
    try:
        new = table.update_item(**update, ReturnValues="ALL_NEW", ReturnValuesOnConditionCheckFailure="ALL_OLD")[
            "Attributes"
        ]
    except ClientError as exc:
        if not condition_failed(exc):
            raise store_unavailable(exc, what) from exc
        old = old_item(exc)
        if old is None:
            raise UnknownDeletionRequestError(deletion_request_id) from exc
        return Request.from_item(old), False
    return Request.from_item(new), True


def cancel(table, deletion_request_id: str, user_id: str, now: float | None = None) -> tuple[bool, Request]:
    """SCHEDULED -> CANCELLED, for the user the request deletes and nobody else.
    (True, request) for the winner; (False, current request) otherwise.

    Cancel and the schedule's claim race on the same item; each is one conditional write
    from SCHEDULED, so exactly one of them wins. The request id is derived from the user
    id, so anyone who knows a user id can compute it: the id says which request, never
    who may cancel it. The user is checked in the same write (and then NotYourRequestError).
    """
    update = {
        "Key": {"deletion_request_id": deletion_request_id},
        "UpdateExpression": "SET #status = :cancelled, cancelled_at = :now REMOVE lease_expires_at",
        "ConditionExpression": allowed_from("cancel") & Attr("user_id").eq(user_id),
        "ExpressionAttributeNames": {"#status": "status"},
        "ExpressionAttributeValues": {":cancelled": Status.CANCELLED.value, ":now": now_seconds(now)},
    }
    request, written = write_or_read_old(table, deletion_request_id, update, f"cancelling {deletion_request_id}")
    if not written and request.user_id != user_id:
        raise NotYourRequestError(f"{deletion_request_id} is not a deletion of user {user_id}; nothing was cancelled")
    return written, request
