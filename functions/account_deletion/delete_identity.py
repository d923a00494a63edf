"""Step 4: delete the user's identity record. DeleteItem of a missing item succeeds,
so the step needs no check of its own to be safe to repeat."""

from __future__ import annotations

import deletion_config as config
import deletion_state as state
from deletion_steps import run_step

STEP = "delete_identity"


def handler(event, context):
    return run_step(STEP, event, context, delete_identity)


def delete_identity(claim: state.Claim) -> None:
    config.table("identities").delete_item(Key={"user_id": claim.user_id})
