"""Step 4: delete the user's identity record, after keeping its address for the goodbye.

The identity holds the only address the goodbye email can go to, so the address is
first copied onto the request (a fenced write, kept if an earlier attempt copied it),
then the identity is deleted. DeleteItem of a missing item succeeds, so the step needs
no check of its own to be safe to repeat.
"""

from __future__ import annotations

from erasure import claims, state
from erasure.steps import run_step
from shared import clients

STEP = "delete_identity"


def handler(event, context):
    return run_step(STEP, event, context, delete_identity)


def delete_identity(claim: claims.Claim, request: state.Request, context=None) -> None:
    identities = clients.dynamodb_table("identities")
    identity = identities.get_item(Key={"user_id": claim.user_id}, ConsistentRead=True).get("Item") or {}
    if identity.get("email") and not request.goodbye_address:
        claims.capture_goodbye_address(clients.dynamodb_table("deletion_requests"), claim, identity["email"])
    identities.delete_item(Key={"user_id": claim.user_id})
