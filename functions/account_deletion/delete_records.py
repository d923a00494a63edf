"""Step 2: delete the user's records and record the step in the same transaction.

Effect and progress commit together or not at all, so there is no moment in which
the records are gone but the step is not marked (or the reverse).
"""

from __future__ import annotations

from boto3.dynamodb.conditions import Key
from botocore.exceptions import ClientError

import deletion_config as config
import deletion_state as state
from deletion_errors import ClaimLost, DeletionStoreUnavailable
from deletion_steps import run_step

STEP = "delete_records"
# TransactWriteItems takes at most 100 actions; one of them is the progress write or
# the claim check, so 99 deletes per transaction.
DELETES_PER_TRANSACTION = 99


def handler(event, context):
    return run_step(STEP, event, context, delete_records, effect_records_progress=True)


def delete_records(claim: state.Claim) -> None:
    records = config.table("user_records")
    requests_table = config.table_name("deletion_requests")
    keys = _record_keys(records, claim.user_id)
    batches = [keys[i : i + DELETES_PER_TRANSACTION] for i in range(0, len(keys), DELETES_PER_TRANSACTION)] or [[]]
    for number, batch in enumerate(batches, start=1):
        items = [{"Delete": {"TableName": records.name, "Key": key}} for key in batch]
        if number == len(batches):
            items.append({"Update": state.step_done_update(requests_table, claim, STEP, config.lease_seconds())})
        else:
            # Earlier batches only check the claim: deleting is safe to repeat, but a
            # superseded worker should stop as soon as it can tell.
            items.append({"ConditionCheck": state.claim_check(requests_table, claim)})
        _commit(items, claim)


def _record_keys(records, user_id: str) -> list[dict]:
    keys, start = [], None
    while True:
        page = records.query(
            KeyConditionExpression=Key("user_id").eq(user_id),
            ProjectionExpression="user_id, record_id",
            ConsistentRead=True,
            **({"ExclusiveStartKey": start} if start else {}),
        )
        keys.extend(page.get("Items", []))
        start = page.get("LastEvaluatedKey")
        if not start:
            return keys


def _commit(items: list[dict], claim: state.Claim) -> None:
    try:
        config.transact_write(items)
    except ClientError as exc:
        reasons = exc.response.get("CancellationReasons") or []
        # The claim write is the last action; its condition failing means we were fenced.
        if reasons and reasons[-1].get("Code") == "ConditionalCheckFailed":
            raise ClaimLost(f"{claim.deletion_request_id}: {STEP} refused for token {claim.fencing_token}") from exc
        raise DeletionStoreUnavailable(f"{STEP} for {claim.deletion_request_id}: {exc.response['Error'].get('Code')}") from exc
