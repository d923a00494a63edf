"""Step 1 of the deletion workflow: claim the request, or learn why not.

The winner gets the claim (lease and fencing token) that every later step carries; a
loser gets the outcome the current status means, and the workflow stops there.
"""

from __future__ import annotations

from erasure import claims, config, faults
from erasure import input as checked
from erasure.steps import claim_to_event
from shared import clients

STEP = "claim"


def handler(event, context):
    # The workflow passes its execution name as ``owner`` and its own input as ``input``
    # (where ``redrive`` may be absent); a direct call may pass the fields flat.
    event = checked.event_object(event)
    request = checked.event_object(event.get("input", event))
    request_id = checked.identifier(request, "deletion_request_id")
    owner = checked.identifier(event, "owner", checked.EXECUTION_NAME_MAX)  # unique per attempt
    redrive = checked.flag(request, "redrive")
    faults.strike(faults.at(STEP, faults.BEFORE), request_id, context)
    result = claims.claim(
        clients.dynamodb_table("deletion_requests"), request_id, owner, config.lease_seconds(), redrive=redrive
    )
    if result.claim is None:
        return {
            "outcome": result.outcome.value,
            "deletion_request_id": request_id,
            "status": result.request.status.value,
        }
    faults.strike(faults.at(STEP, faults.AFTER_PROGRESS), request_id, context)
    return {"outcome": result.outcome.value, **claim_to_event(result.claim)}
