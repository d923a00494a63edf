"""Claims, leases and fencing tokens: how one worker at a time takes a deletion request,
records its progress step by step, and completes it or gives it back.

A claim is one conditional write that moves the request to PROCESSING with a lease and
the next fencing token; every later write of the worker carries the token
(``holds_claim``), so a worker whose lease ran out and was superseded is refused
(ClaimLostError) instead of writing over the new owner's work.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from boto3.dynamodb.conditions import Attr, ConditionExpressionBuilder
from botocore.exceptions import ClientError

from erasure.errors import ClaimLostError, StepsNotFinishedError, UnknownRecoveryPointError
from erasure.state import (
    STEPS,
    Request,
    Status,
    allowed_from,
    condition_failed,
    now_seconds,
    read,
    store_unavailable,
    write_or_read_old,
)


class ClaimOutcome(StrEnum):
    CLAIMED = "claimed"  # this worker holds the request: go on
    ALREADY_DONE = "already_done"
    IN_PROGRESS = "in_progress"  # another worker holds a live lease
    CANCELLED = "cancelled"
    FAILED = "failed"  # out of attempts; only a redrive may claim it
    NOT_DUE = "not_due"  # still SCHEDULED and its due time has not come: the grace period holds


_MEANING_FOR_LOSER = {
    Status.COMPLETED: ClaimOutcome.ALREADY_DONE,
    Status.PROCESSING: ClaimOutcome.IN_PROGRESS,
    Status.CANCELLED: ClaimOutcome.CANCELLED,
    Status.FAILED: ClaimOutcome.FAILED,
}


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
    t = now_seconds(now)
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
    waiting = allowed_from("claim") & due
    lease_expired = allowed_from("claim_after_lease_expired") & Attr("lease_expires_at").lt(t)
    # Only an operator's redrive may take a FAILED request, with a fresh attempt budget.
    redriven = allowed_from("claim_redriven")
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
    request, written = write_or_read_old(table, deletion_request_id, update, f"claiming {deletion_request_id}")
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
        "ConditionExpression": allowed_from("claim_again")
        & Attr("lease_owner").eq(seen.lease_owner)
        & Attr("fencing_token").eq(seen.fencing_token),
        "ExpressionAttributeValues": {":until": t + int(lease_seconds), ":now": t, ":one": 1},
    }
    request, written = write_or_read_old(
        table, seen.deletion_request_id, update, f"claiming {seen.deletion_request_id} again"
    )
    if not written:  # someone else moved it meanwhile
        return ClaimResult(_loser_outcome(request, redrive), None, request)
    return _won(request, seen.lease_owner)


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
    raise UnknownRecoveryPointError(f"bug: claim refused while {request.status}")


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
        "ExpressionAttributeValues": {
            **spec.get("ExpressionAttributeValues", {}),
            **built.attribute_value_placeholders,
        },
    }


def step_done_update(table_name: str, claim: Claim, step: str, lease_seconds: int, now: float | None = None) -> dict:
    """The progress write for ``step``, as an Update usable alone or inside a transaction.

    It also renews the lease: a worker that keeps making progress keeps its claim.
    """
    if step not in STEPS:
        raise UnknownRecoveryPointError(f"bug: unknown step {step!r}")
    spec = {
        "TableName": table_name,
        "Key": {"deletion_request_id": claim.deletion_request_id},
        "UpdateExpression": "ADD steps_done :step SET lease_expires_at = :until",
        "ExpressionAttributeValues": {":step": {step}, ":until": now_seconds(now) + int(lease_seconds)},
    }
    return with_condition(spec, holds_claim(claim))


def lease_renewal(table_name: str, claim: Claim, lease_seconds: int, now: float | None = None) -> dict:
    """A write that only renews the lease under this claim: a paged step's page."""
    spec = {
        "TableName": table_name,
        "Key": {"deletion_request_id": claim.deletion_request_id},
        "UpdateExpression": "SET lease_expires_at = :until",
        "ExpressionAttributeValues": {":until": now_seconds(now) + int(lease_seconds)},
    }
    return with_condition(spec, holds_claim(claim))


def renew_lease(table, claim: Claim, lease_seconds: int, now: float | None = None) -> None:
    """Renew this claim's lease, or raise ClaimLostError if it was superseded."""
    update = lease_renewal(table.name, claim, lease_seconds, now)
    del update["TableName"]
    _fenced_update(table, claim, update, "renewing the lease")


def claim_check(table_name: str, claim: Claim) -> dict:
    """A transaction action that only asserts this worker still holds the claim."""
    return with_condition(
        {"TableName": table_name, "Key": {"deletion_request_id": claim.deletion_request_id}}, holds_claim(claim)
    )


def record_step(table, claim: Claim, step: str, lease_seconds: int, now: float | None = None) -> None:
    """Mark ``step`` done for this claim, or raise ClaimLostError if the claim was superseded."""
    update = step_done_update(table.name, claim, step, lease_seconds, now)
    del update["TableName"]
    _fenced_update(table, claim, update, f"recording {step}")


def complete(table, claim: Claim, now: float | None = None) -> None:
    """PROCESSING -> COMPLETED, only for the current token and only once every step is done.

    Completing again under the same token is a no-op, so a retried completion succeeds.
    """
    every_step = allowed_from("complete")
    for step in STEPS:
        every_step = every_step & Attr("steps_done").contains(step)
    update = {
        "Key": {"deletion_request_id": claim.deletion_request_id},
        # The captured address goes too: it was kept only for the goodbye.
        "UpdateExpression": (
            "SET #status = :completed, completed_at = :now REMOVE lease_expires_at, lease_owner, goodbye_address"
        ),
        "ConditionExpression": holds_claim(claim) & every_step,
        "ExpressionAttributeNames": {"#status": "status"},
        "ExpressionAttributeValues": {":completed": Status.COMPLETED.value, ":now": now_seconds(now)},
    }
    try:
        _fenced_update(table, claim, update, "completing")
    except ClaimLostError:
        current = read(table, claim.deletion_request_id)
        if current.status is Status.COMPLETED and current.fencing_token == claim.fencing_token:
            return  # this claim completed it already: a retry whose first reply was lost
        if current.status is Status.PROCESSING and current.fencing_token == claim.fencing_token:
            missing = sorted(set(STEPS) - current.steps_done)
            raise StepsNotFinishedError(f"{claim.deletion_request_id}: steps not done: {', '.join(missing)}") from None
        raise


def give_back(out_of_attempts: bool, error: str, retry_at: int) -> dict:
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
    return {
        "UpdateExpression": expression,
        "ExpressionAttributeNames": {"#status": "status"},
        "ExpressionAttributeValues": values,
    }


def release_after_failure(
    table, claim: Claim, error: str, max_attempts: int, retry_delay_seconds: int, now: float | None = None
) -> Status:
    """Give the request back after a failed attempt: RETRYABLE, or FAILED once out of attempts."""
    out_of_attempts = is_last_attempt(claim.attempts, max_attempts)
    update = {
        "Key": {"deletion_request_id": claim.deletion_request_id},
        "ConditionExpression": holds_claim(claim) & allowed_from("release_after_failure"),
        **give_back(out_of_attempts, error, now_seconds(now) + int(retry_delay_seconds)),
    }
    _fenced_update(table, claim, update, "releasing after failure")
    return Status.FAILED if out_of_attempts else Status.RETRYABLE


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


def _fenced_update(table, claim: Claim, update: dict, what: str) -> None:
    try:
        table.update_item(**update)
    except ClientError as exc:
        raise _refused(exc, claim, what, fenced=condition_failed(exc)) from exc


def fenced_transaction(transact_write, items: list[dict], claim: Claim, what: str) -> None:
    """``transact_write(items)``, a TransactWriteItems whose last action carries the
    claim's condition (``holds_claim``); ClaimLostError when that condition refused it."""
    try:
        transact_write(items)
    except ClientError as exc:
        reasons = exc.response.get("CancellationReasons") or []
        raise _refused(
            exc, claim, what, fenced=bool(reasons) and reasons[-1].get("Code") == "ConditionalCheckFailed"
        ) from exc


def _refused(exc: ClientError, claim: Claim, what: str, fenced: bool) -> Exception:
    """A refused write under a claim as a domain error: fenced out, or the store failed."""
    if fenced:
        return ClaimLostError(f"{claim.deletion_request_id}: {what} refused for token {claim.fencing_token}")
    return store_unavailable(exc, f"{what} {claim.deletion_request_id}")
