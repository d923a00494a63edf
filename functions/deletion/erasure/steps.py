"""The recovery points of one deletion attempt, shared by the step functions.

The workflow passes the claim from step to step. Each step is a recovery point: it
first checks that its worker still holds the claim, skips itself when an earlier
attempt already recorded it, and otherwise does its effect (idempotent, so doing it
again after a crash changes nothing) and then records its progress under the token.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from erasure import claims, config, faults, state
from erasure import input as checked
from erasure.errors import ClaimLostError, InvalidDeletionInputError, UnknownRecoveryPointError
from shared import clients


def claim_to_event(claim: claims.Claim) -> dict:
    """The claim as JSON for the workflow state."""
    return {
        "deletion_request_id": claim.deletion_request_id,
        "user_id": claim.user_id,
        "owner": claim.owner,
        "fencing_token": claim.fencing_token,
        "attempts": claim.attempts,
        "lease_expires_at": claim.lease_expires_at,
        "steps_done": sorted(claim.steps_done),
    }


def claim_from_event(event: dict) -> claims.Claim:
    """The claim a step was handed; bad input raises before anything is touched."""
    if not isinstance(event, dict):
        raise InvalidDeletionInputError(f"a step needs the claim as a JSON object, not {type(event).__name__}")
    # No user_id required: the steps take the user from the stored request, never from here.
    missing = [f for f in ("deletion_request_id", "owner", "fencing_token") if f not in event]
    if missing:
        raise InvalidDeletionInputError(f"the claim is missing {', '.join(missing)}")
    token = event["fencing_token"]
    if isinstance(token, bool) or not isinstance(token, int) or token < 1:
        raise InvalidDeletionInputError(f"fencing_token must be a positive integer, not {token!r}")
    attempts = event.get("attempts", 0)
    if isinstance(attempts, bool) or not isinstance(attempts, int) or attempts < 0:
        raise InvalidDeletionInputError(f"attempts must be a whole number, not {attempts!r}")
    steps_done = event.get("steps_done", [])
    if not isinstance(steps_done, list) or not set(steps_done) <= set(state.STEPS):
        raise InvalidDeletionInputError(f"steps_done must be a list of {', '.join(state.STEPS)}, not {steps_done!r}")
    lease = event.get("lease_expires_at", 0)
    if isinstance(lease, bool) or not isinstance(lease, int):
        raise InvalidDeletionInputError(f"lease_expires_at must be epoch seconds, not {lease!r}")
    return claims.Claim(
        deletion_request_id=checked.identifier(event, "deletion_request_id"),
        user_id=str(event.get("user_id", "")),
        owner=checked.identifier(event, "owner", checked.EXECUTION_NAME_MAX),
        fencing_token=token,
        attempts=attempts,
        lease_expires_at=lease,
        steps_done=frozenset(steps_done),
    )


# A step that deletes page by page starts no new page with less time than this left
# before its Lambda timeout: a page (a query and a 99-item transaction, or a listing and
# a 1000-object delete) takes well under a second, so five leave room for a slow one.
PAGE_MARGIN_SECONDS = 5
MORE_TO_DO = "more_to_do"  # in a step's output: it stopped before its deadline; run it again


def time_is_short(context) -> bool:
    """True when a paged step should stop and hand over to its next invocation."""
    return context.get_remaining_time_in_millis() < PAGE_MARGIN_SECONDS * 1000


def run_step(
    step: str,
    event: dict,
    context,
    effect: Callable[..., bool | None],
    effect_records_progress: bool = False,
) -> dict:
    """Run one step as a recovery point; returns the claim for the next step.

    The effect gets the claim and the stored request, and acts only on what the stored
    request says (its user): the event is only trusted to name the request and carry
    the token. An effect that returns False stopped early (page by page, before its
    deadline): the output says ``more_to_do`` and the workflow runs the step again.

    ``effect_records_progress``: the effect writes its own progress in the same
    transaction, so there is no moment between effect and progress to fail in.
    """
    if step not in state.STEPS:
        raise UnknownRecoveryPointError(f"bug: unknown step {step!r}")
    claim = claim_from_event(event)
    table = clients.dynamodb_table("deletion_requests")
    current = state.read(table, claim.deletion_request_id)
    if current.status is not state.Status.PROCESSING or current.fencing_token != claim.fencing_token:
        # Checked before the effect to spare a superseded worker useless work; the
        # progress write below is what actually keeps it out.
        raise ClaimLostError(
            f"{claim.deletion_request_id}: token {claim.fencing_token} superseded "
            f"({current.status}, token {current.fencing_token})"
        )
    done = {key: value for key, value in event.items() if key != MORE_TO_DO}
    if step in current.steps_done:
        return {**done, "steps_done": sorted(current.steps_done)}
    claim = dataclasses.replace(claim, user_id=current.user_id)
    faults.strike(faults.at(step, faults.BEFORE), claim.deletion_request_id, context)
    if effect(claim, current, context) is False:
        return {**done, MORE_TO_DO: True}
    if not effect_records_progress:
        faults.strike(faults.at(step, faults.AFTER_EFFECT), claim.deletion_request_id, context)
        claims.record_step(table, claim, step, config.lease_seconds())
    faults.strike(faults.at(step, faults.AFTER_PROGRESS), claim.deletion_request_id, context)
    return {**done, "user_id": current.user_id, "steps_done": sorted(current.steps_done | {step})}
