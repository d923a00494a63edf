"""Claims, leases and fencing tokens for deletion requests.

Every write to the ``deletion_requests`` table goes through this module, and every one
of them is a single conditional write, so DynamoDB decides each race in one place.
One job per function; the handlers only choose which of them to call.

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

from boto3.dynamodb.conditions import Attr, ConditionExpressionBuilder, Key
from boto3.dynamodb.types import TypeDeserializer
from botocore.exceptions import ClientError

from deletion_errors import (
    ClaimLost,
    DeletionStoreUnavailable,
    MalformedRequest,
    NotYourRequest,
    StepsNotFinished,
    UnknownDeletionRequest,
    UnknownRecoveryPoint,
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
    by: str  # the write that makes it: a function of this module


# Every status change a write of this module makes, and the one place they are written
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
        raise UnknownRecoveryPoint(f"bug: no transition is made by {by!r}")
    return found


def _from(by: str):
    """The condition that the request is in a status ``by`` may move it from."""
    sources = _sources(by)
    return Attr("status").eq(sources[0]) if len(sources) == 1 else Attr("status").is_in(sources)


class ClaimOutcome(StrEnum):
    CLAIMED = "claimed"  # this worker holds the request: go on
    ALREADY_DONE = "already_done"
    IN_PROGRESS = "in_progress"  # another worker holds a live lease
    CANCELLED = "cancelled"
    FAILED = "failed"  # out of attempts; only a redrive may claim it
    NOT_DUE = "not_due"  # still SCHEDULED and its due time has not come: the grace period holds


# The steps that record progress, in workflow order: the one place the order is written.
# Completion requires all of them; the naive worker runs them in this order, and a test
# holds the workflow's ASL (account_deletion.asl.json) to it.
STEPS = ("delete_records", "delete_files", "delete_identity", "send_goodbye")

BY_STATUS_LEASE = "by_status_lease"
BY_USER = "by_user"

_MEANING_FOR_LOSER = {
    Status.COMPLETED: ClaimOutcome.ALREADY_DONE,
    Status.PROCESSING: ClaimOutcome.IN_PROGRESS,
    Status.CANCELLED: ClaimOutcome.CANCELLED,
    Status.FAILED: ClaimOutcome.FAILED,
}


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
            raise UnknownRecoveryPoint(f"bug: unknown status {status!r} on {item.get('deletion_request_id')}")
        for name in ("deletion_request_id", "user_id"):
            if not isinstance(item.get(name), str) or not item[name]:
                raise MalformedRequest(f"{item.get('deletion_request_id')!r}: the stored request has no {name} ({item.get(name)!r})")
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


@dataclass(frozen=True)
class Claim:
    """What a winning worker holds: the token every one of its writes must carry."""

    deletion_request_id: str
    user_id: str
    owner: str
    fencing_token: int
    attempts: int
    lease_expires_at: int
    steps_done: frozenset[str]


@dataclass(frozen=True)
class ClaimResult:
    outcome: ClaimOutcome
    claim: Claim | None
    request: Request


def _now(now: float | None) -> int:
    return int(time.time() if now is None else now)


def _condition_failed(exc: ClientError) -> bool:
    return exc.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException"


def _old_item(exc: ClientError) -> dict | None:
    """The item as it was when the condition failed (ReturnValuesOnConditionCheckFailure)."""
    raw = exc.response.get("Item")
    if not raw:
        return None
    deserializer = TypeDeserializer()
    return {name: deserializer.deserialize(value) for name, value in raw.items()}


def _unavailable(exc: ClientError, what: str) -> DeletionStoreUnavailable:
    return DeletionStoreUnavailable(f"{what}: {exc.response.get('Error', {}).get('Code')}")


def read(table, deletion_request_id: str) -> Request:
    """The request as it is now (strongly consistent), or UnknownDeletionRequest."""
    try:
        item = table.get_item(Key={"deletion_request_id": deletion_request_id}, ConsistentRead=True).get("Item")
    except ClientError as exc:
        raise _unavailable(exc, f"reading {deletion_request_id}") from exc
    if item is None:
        raise UnknownDeletionRequest(deletion_request_id)
    return Request.from_item(item)


def create(
    table, deletion_request_id: str, user_id: str, due_at: int, now: float | None = None, delay_seconds: int | None = None
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
        "created_at": _now(now),
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
        if not _condition_failed(exc):
            raise _unavailable(exc, f"creating {deletion_request_id}") from exc
        old = _old_item(exc)
        return (Request.from_item(old) if old else read(table, deletion_request_id)), False
    return Request.from_item(item), True


def claim(
    table,
    deletion_request_id: str,
    owner: str,
    lease_seconds: int,
    now: float | None = None,
    redrive: bool = False,
) -> ClaimResult:
    """Take the request for ``owner`` with a fresh lease and the next fencing token.

    A loser gets the outcome that the current status means, and acts on nothing.
    """
    t = _now(now)
    # The timeline this condition guards against:
    #
    #   worker A  claim (token 7) ── stalls: GC pause, slow network ──────── write(7) refused
    #   lease A   [=========== 120 s ===========]
    #   worker B                                   claim (token 8) ─ write(8) accepted
    #
    # A may claim only while nobody holds a live lease; B may claim after A's lease ran
    # out even though A is still alive, and the token is what stops A's late writes.
    exists = Attr("deletion_request_id").exists()
    # The grace period binds whoever starts the workflow: a schedule, a duplicate, an
    # operator or a forged start. A request is claimed only once it is due, so a start
    # before its due time finds it SCHEDULED, changes nothing, and the user can still
    # cancel. (A RETRYABLE or lease-expired request was claimed before, so it is due.)
    due = Attr("due_at").lte(t)
    waiting = _from("claim") & due
    lease_expired = _from("claim_after_lease_expired") & Attr("lease_expires_at").lt(t)
    # Only an operator's redrive may take a FAILED request, with a fresh attempt budget.
    redriven = _from("claim_redriven")
    claimable = redriven if redrive else waiting | lease_expired
    attempts = "attempts = :one" if redrive else "attempts = if_not_exists(attempts, :zero) + :one"
    update = {
        "Key": {"deletion_request_id": deletion_request_id},
        "UpdateExpression": (
            "SET #status = :processing, lease_owner = :owner, lease_expires_at = :until, claimed_at = :now, "
            "unclaimed_restarts = :zero, fencing_token = if_not_exists(fencing_token, :zero) + :one, " + attempts
        ),
        "ConditionExpression": exists & claimable,
        "ExpressionAttributeNames": {"#status": "status"},
        "ExpressionAttributeValues": {
            ":processing": Status.PROCESSING.value,
            ":owner": owner,
            ":until": t + int(lease_seconds),
            ":now": t,
            ":zero": 0,
            ":one": 1,
        },
    }
    request, written = _write_or_read_old(table, deletion_request_id, update, f"claiming {deletion_request_id}")
    if not written:
        if request.status is Status.PROCESSING and request.lease_owner == owner:
            return _claim_again(table, request, lease_seconds, t, redrive)
        return ClaimResult(_loser_outcome(request, redrive), None, request)
    return _won(request, owner)


def _claim_again(table, seen: Request, lease_seconds: int, t: int, redrive: bool) -> ClaimResult:
    """The same owner claiming again: its workflow retried the claim after the first
    reply was lost (or the claim step died after its write). A new token, so anything
    still running under the old one is fenced out; not a new attempt, since it is the
    same execution trying again."""
    update = {
        "Key": {"deletion_request_id": seen.deletion_request_id},
        "UpdateExpression": "SET lease_expires_at = :until, claimed_at = :now, fencing_token = fencing_token + :one",
        "ConditionExpression": _from("claim_again")
        & Attr("lease_owner").eq(seen.lease_owner)
        & Attr("fencing_token").eq(seen.fencing_token),
        "ExpressionAttributeValues": {":until": t + int(lease_seconds), ":now": t, ":one": 1},
    }
    request, written = _write_or_read_old(table, seen.deletion_request_id, update, f"claiming {seen.deletion_request_id} again")
    if not written:  # someone else moved it meanwhile
        return ClaimResult(_loser_outcome(request, redrive), None, request)
    return _won(request, seen.lease_owner)


def _write_or_read_old(table, deletion_request_id: str, update: dict, what: str) -> tuple[Request, bool]:
    """(the request after the write, True), or, when its condition refused it, (the
    request as it was then, False): a loser learns what it lost to from the same call."""
    try:
        new = table.update_item(**update, ReturnValues="ALL_NEW", ReturnValuesOnConditionCheckFailure="ALL_OLD")["Attributes"]
    except ClientError as exc:
        if not _condition_failed(exc):
            raise _unavailable(exc, what) from exc
        old = _old_item(exc)
        if old is None:
            raise UnknownDeletionRequest(deletion_request_id) from exc
        return Request.from_item(old), False
    return Request.from_item(new), True


def _won(request: Request, owner: str) -> ClaimResult:
    held = Claim(
        deletion_request_id=request.deletion_request_id,
        user_id=request.user_id,
        owner=owner,
        fencing_token=request.fencing_token,
        attempts=request.attempts,
        lease_expires_at=int(request.lease_expires_at or 0),
        steps_done=request.steps_done,
    )
    return ClaimResult(ClaimOutcome.CLAIMED, held, request)


def _loser_outcome(request: Request, redrive: bool) -> ClaimOutcome:
    if request.status in _MEANING_FOR_LOSER:
        return _MEANING_FOR_LOSER[request.status]
    # SCHEDULED or RETRYABLE refused only a redrive: the request is not failed, it is
    # waiting for its ordinary delivery, which will claim it.
    if redrive:
        return ClaimOutcome.IN_PROGRESS
    if request.status is Status.SCHEDULED:
        return ClaimOutcome.NOT_DUE  # refused by the due time: started early
    raise UnknownRecoveryPoint(f"bug: claim refused while {request.status}")


def is_last_attempt(attempts: int, max_attempts: int) -> bool:
    """True when a failure of this attempt should end in FAILED rather than RETRYABLE."""
    return attempts >= max_attempts


def holds_claim(claim: Claim):
    """The condition every progress write carries: still PROCESSING, still this token."""
    return Attr("status").eq(Status.PROCESSING.value) & Attr("fencing_token").eq(claim.fencing_token)


def with_condition(spec: dict, condition) -> dict:
    """``spec`` with ``condition`` written out as expression, names and values.

    Table methods do this themselves, but inside TransactWriteItems each action must
    carry its own placeholders, so the progress write and the claim check build theirs.
    """
    built = ConditionExpressionBuilder().build_expression(condition)
    return {
        **spec,
        "ConditionExpression": built.condition_expression,
        "ExpressionAttributeNames": {**spec.get("ExpressionAttributeNames", {}), **built.attribute_name_placeholders},
        "ExpressionAttributeValues": {**spec.get("ExpressionAttributeValues", {}), **built.attribute_value_placeholders},
    }


def step_done_update(table_name: str, claim: Claim, step: str, lease_seconds: int, now: float | None = None) -> dict:
    """The progress write for ``step``, as an Update usable alone or inside a transaction.

    It also renews the lease: a worker that keeps making progress keeps its claim.
    """
    if step not in STEPS:
        raise UnknownRecoveryPoint(f"bug: unknown step {step!r}")
    spec = {
        "TableName": table_name,
        "Key": {"deletion_request_id": claim.deletion_request_id},
        "UpdateExpression": "ADD steps_done :step SET lease_expires_at = :until",
        "ExpressionAttributeValues": {":step": {step}, ":until": _now(now) + int(lease_seconds)},
    }
    return with_condition(spec, holds_claim(claim))


def lease_renewal(table_name: str, claim: Claim, lease_seconds: int, now: float | None = None) -> dict:
    """A write that only renews the lease under this claim: a paged step's page."""
    spec = {
        "TableName": table_name,
        "Key": {"deletion_request_id": claim.deletion_request_id},
        "UpdateExpression": "SET lease_expires_at = :until",
        "ExpressionAttributeValues": {":until": _now(now) + int(lease_seconds)},
    }
    return with_condition(spec, holds_claim(claim))


def renew_lease(table, claim: Claim, lease_seconds: int, now: float | None = None) -> None:
    """Renew this claim's lease, or raise ClaimLost if it was superseded."""
    update = lease_renewal(table.name, claim, lease_seconds, now)
    del update["TableName"]
    _fenced_update(table, claim, update, "renewing the lease")


def claim_check(table_name: str, claim: Claim) -> dict:
    """A transaction action that only asserts this worker still holds the claim."""
    return with_condition({"TableName": table_name, "Key": {"deletion_request_id": claim.deletion_request_id}}, holds_claim(claim))


def record_step(table, claim: Claim, step: str, lease_seconds: int, now: float | None = None) -> None:
    """Mark ``step`` done for this claim, or raise ClaimLost if the claim was superseded."""
    update = step_done_update(table.name, claim, step, lease_seconds, now)
    del update["TableName"]
    _fenced_update(table, claim, update, f"recording {step}")


def complete(table, claim: Claim, now: float | None = None) -> None:
    """PROCESSING -> COMPLETED, only for the current token and only once every step is done.

    Completing again under the same token is a no-op, so a retried completion succeeds.
    """
    every_step = _from("complete")
    for step in STEPS:
        every_step = every_step & Attr("steps_done").contains(step)
    update = {
        "Key": {"deletion_request_id": claim.deletion_request_id},
        # The captured address goes too: it was kept only for the goodbye.
        "UpdateExpression": "SET #status = :completed, completed_at = :now REMOVE lease_expires_at, lease_owner, goodbye_address",
        "ConditionExpression": holds_claim(claim) & every_step,
        "ExpressionAttributeNames": {"#status": "status"},
        "ExpressionAttributeValues": {":completed": Status.COMPLETED.value, ":now": _now(now)},
    }
    try:
        _fenced_update(table, claim, update, "completing")
    except ClaimLost:
        current = read(table, claim.deletion_request_id)
        if current.status is Status.COMPLETED and current.fencing_token == claim.fencing_token:
            return  # this claim completed it already: a retry whose first reply was lost
        if current.status is Status.PROCESSING and current.fencing_token == claim.fencing_token:
            missing = sorted(set(STEPS) - current.steps_done)
            raise StepsNotFinished(f"{claim.deletion_request_id}: steps not done: {', '.join(missing)}") from None
        raise


def _give_back(out_of_attempts: bool, error: str, retry_at: int) -> dict:
    """The update that gives a request back after an attempt failed or its worker
    vanished: FAILED once out of attempts, else RETRYABLE with ``lease_expires_at`` set
    to when it may be retried, so the sweeper finds it on the same index as an expired
    lease. The caller adds the key and its condition."""
    if out_of_attempts:
        expression = "SET #status = :next, last_error = :error REMOVE lease_expires_at, lease_owner"
        values = {":next": Status.FAILED.value, ":error": error[:1000]}
    else:
        expression = "SET #status = :next, last_error = :error, lease_expires_at = :retry_at REMOVE lease_owner"
        values = {":next": Status.RETRYABLE.value, ":error": error[:1000], ":retry_at": retry_at}
    return {"UpdateExpression": expression, "ExpressionAttributeNames": {"#status": "status"}, "ExpressionAttributeValues": values}


def release_after_failure(
    table, claim: Claim, error: str, max_attempts: int, retry_delay_seconds: int, now: float | None = None
) -> Status:
    """Give the request back after a failed attempt: RETRYABLE, or FAILED once out of attempts."""
    out_of_attempts = is_last_attempt(claim.attempts, max_attempts)
    update = {
        "Key": {"deletion_request_id": claim.deletion_request_id},
        "ConditionExpression": holds_claim(claim) & _from("release_after_failure"),
        **_give_back(out_of_attempts, error, _now(now) + int(retry_delay_seconds)),
    }
    _fenced_update(table, claim, update, "releasing after failure")
    return Status.FAILED if out_of_attempts else Status.RETRYABLE


def cancel(table, deletion_request_id: str, user_id: str, now: float | None = None) -> tuple[bool, Request]:
    """SCHEDULED -> CANCELLED, for the user the request deletes and nobody else.
    (True, request) for the winner; (False, current request) otherwise.

    Cancel and the schedule's claim race on the same item; each is one conditional write
    from SCHEDULED, so exactly one of them wins. The request id is derived from the user
    id, so anyone who knows a user id can compute it: the id says which request, never
    who may cancel it. The user is checked in the same write (and then NotYourRequest).
    """
    update = {
        "Key": {"deletion_request_id": deletion_request_id},
        "UpdateExpression": "SET #status = :cancelled, cancelled_at = :now REMOVE lease_expires_at",
        "ConditionExpression": _from("cancel") & Attr("user_id").eq(user_id),
        "ExpressionAttributeNames": {"#status": "status"},
        "ExpressionAttributeValues": {":cancelled": Status.CANCELLED.value, ":now": _now(now)},
    }
    request, written = _write_or_read_old(table, deletion_request_id, update, f"cancelling {deletion_request_id}")
    if not written and request.user_id != user_id:
        raise NotYourRequest(f"{deletion_request_id} is not a deletion of user {user_id}; nothing was cancelled")
    return written, request


def expired_leases(table, now: float | None = None, malformed: list | None = None) -> list[Request]:
    """PROCESSING requests whose lease ran out, from the index (no table scan).

    ``malformed``: a list to which the rows that cannot be read as a request are added
    (as MalformedRequest), instead of one such row failing the whole query.
    """
    return _query_status_before(table, Status.PROCESSING, _now(now), malformed)


def due_retries(table, now: float | None = None, malformed: list | None = None) -> list[Request]:
    """RETRYABLE requests whose retry time has come, from the same index."""
    return _query_status_before(table, Status.RETRYABLE, _now(now) + 1, malformed)


def overdue_scheduled(table, grace_seconds: int, now: float | None = None, malformed: list | None = None) -> list[Request]:
    """SCHEDULED requests still unclaimed ``grace_seconds`` after they were due (or after
    their last restart's time to claim): their start failed before it could claim."""
    return _query_status_before(table, Status.SCHEDULED, _now(now) - int(grace_seconds), malformed)


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
        "ExpressionAttributeValues": {":zero": 0, ":one": 1, ":until": _now(now) + int(claim_within_seconds)},
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
        "ConditionExpression": _as_seen(seen) & _from("fail_unclaimed"),
        "ExpressionAttributeNames": {"#status": "status"},
        "ExpressionAttributeValues": {":failed": Status.FAILED.value, ":error": error[:1000]},
    }
    if _update_unless_moved(table, update, f"failing {seen.deletion_request_id}") is None:
        return False
    return True


def capture_goodbye_address(table, claim: Claim, address: str) -> None:
    """Keep the user's address on the request, under the claim, before the identity that
    holds it is deleted; an address captured by an earlier attempt stays."""
    update = {
        "Key": {"deletion_request_id": claim.deletion_request_id},
        "UpdateExpression": "SET goodbye_address = if_not_exists(goodbye_address, :address)",
        "ConditionExpression": holds_claim(claim),
        "ExpressionAttributeValues": {":address": address},
    }
    _fenced_update(table, claim, update, "capturing the goodbye address")


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
            raise _unavailable(exc, f"querying {status} on {BY_STATUS_LEASE}") from exc
        for item in page.get("Items", []):
            try:
                found.append(Request.from_item(item))
            except MalformedRequest as exc:
                if malformed is None:
                    raise
                malformed.append(exc)  # one bad row must not hide the others from the caller
        start = page.get("LastEvaluatedKey")
        if not start:
            return found


def sweep(table, seen: Request, max_attempts: int, retry_delay_seconds: int = 0, now: float | None = None) -> Status | None:
    """Move a request whose lease expired to RETRYABLE (FAILED when out of attempts).

    Conditional on the token the sweeper saw, so a claim that lands between the index
    query and this write is left alone. None when the request moved on meanwhile.
    """
    t = _now(now)
    out_of_attempts = is_last_attempt(seen.attempts, max_attempts)
    still_as_seen = _from("sweep") & Attr("fencing_token").eq(seen.fencing_token) & Attr("lease_expires_at").lt(t)
    update = {
        "Key": {"deletion_request_id": seen.deletion_request_id},
        "ConditionExpression": still_as_seen,
        **_give_back(out_of_attempts, f"lease of {seen.lease_owner} expired", t + int(retry_delay_seconds)),
    }
    if _update_unless_moved(table, update, f"sweeping {seen.deletion_request_id}") is None:
        return None
    return Status.FAILED if out_of_attempts else Status.RETRYABLE


def _fenced_update(table, claim: Claim, update: dict, what: str) -> None:
    try:
        table.update_item(**update)
    except ClientError as exc:
        raise _refused(exc, claim, what, fenced=_condition_failed(exc)) from exc


def fenced_transaction(transact_write, items: list[dict], claim: Claim, what: str) -> None:
    """``transact_write(items)``, a TransactWriteItems whose last action carries the
    claim's condition (``holds_claim``); ClaimLost when that condition refused it."""
    try:
        transact_write(items)
    except ClientError as exc:
        reasons = exc.response.get("CancellationReasons") or []
        raise _refused(exc, claim, what, fenced=bool(reasons) and reasons[-1].get("Code") == "ConditionalCheckFailed") from exc


def _refused(exc: ClientError, claim: Claim, what: str, fenced: bool) -> Exception:
    """A refused write under a claim as a domain error: fenced out, or the store failed."""
    if fenced:
        return ClaimLost(f"{claim.deletion_request_id}: {what} refused for token {claim.fencing_token}")
    return _unavailable(exc, f"{what} {claim.deletion_request_id}")


def _update_unless_moved(table, update: dict, what: str) -> dict | None:
    """A write of the sweeper's: the new attributes (empty unless asked for), or None when
    its condition failed because the request moved on since it was read."""
    try:
        return table.update_item(**update).get("Attributes", {})
    except ClientError as exc:
        if _condition_failed(exc):
            return None
        raise _unavailable(exc, what) from exc
