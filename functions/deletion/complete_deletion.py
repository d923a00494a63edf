"""Last step: end the attempt. COMPLETED when every step is done; after a failure
(the workflow's Catch passes ``error``), RETRYABLE, or FAILED plus a dead-letter message
once the attempts are used up."""

from __future__ import annotations

import contextlib
import dataclasses
import json

from erasure import claims, config, dead_letters, faults, state
from erasure.errors import ClaimLostError
from erasure.steps import claim_from_event
from shared import clients

STEP = "complete"


def handler(event, context):
    claim = claim_from_event(event)
    if "error" in event:
        return release(claim, _describe(event["error"]))
    faults.strike(faults.at(STEP, faults.BEFORE), claim.deletion_request_id, context)
    claims.complete(clients.dynamodb_table("deletion_requests"), claim)
    faults.strike(faults.at(STEP, faults.AFTER_PROGRESS), claim.deletion_request_id, context)
    return {"deletion_request_id": claim.deletion_request_id, "status": state.Status.COMPLETED.value}


def release(claim: claims.Claim, reason: str) -> dict:
    table = clients.dynamodb_table("deletion_requests")
    current = state.read(table, claim.deletion_request_id)
    if current.status is not state.Status.PROCESSING or current.fencing_token != claim.fencing_token:
        return {"deletion_request_id": claim.deletion_request_id, "status": "superseded"}
    dead_letters.send_on_last_attempt(current, reason)
    try:
        # The attempt count is the stored one, not what the event says.
        held = dataclasses.replace(claim, user_id=current.user_id, attempts=current.attempts)
        status = claims.release_after_failure(table, held, reason, config.max_attempts(), config.retry_delay_seconds())
    except ClaimLostError:
        return {"deletion_request_id": claim.deletion_request_id, "status": "superseded"}
    return {"deletion_request_id": claim.deletion_request_id, "status": status.value, "error": reason}


def _describe(error) -> str:
    """Step Functions' Catch output ({"Error", "Cause"}) as one line."""
    if isinstance(error, dict):
        cause = error.get("Cause", "")
        with contextlib.suppress(ValueError, AttributeError):
            cause = json.loads(cause).get("errorMessage", cause)
        return f"{error.get('Error', 'Error')}: {cause}".strip()
    return str(error)
