"""Step 2: delete the user's records, page by page, and record the step with the last page.

Each page is one transaction: up to 99 deletes plus a write that renews the claim's
lease under its token (or, with the last page, records the step). So the records and
the progress commit together or not at all, a superseded worker stops at its next
page, and what a crashed or timed-out invocation deleted stays deleted: the next one
queries again and finds only what is left. Nothing is listed in full first, so a user
with millions of records costs time, never an attempt that cannot finish.
"""

from __future__ import annotations

from boto3.dynamodb.conditions import Key

from erasure import claims, config, state
from erasure.steps import run_step, time_is_short
from shared import clients, settings

STEP = "delete_records"
# TransactWriteItems takes at most 100 actions; one of them is the progress write or
# the lease renewal, so 99 deletes per transaction.
DELETES_PER_TRANSACTION = 99


def handler(event, context):
    return run_step(STEP, event, context, delete_records, effect_records_progress=True)


def delete_records(claim: claims.Claim, request: state.Request, context=None) -> bool:
    """True once every record is gone and the step recorded; False when it stopped for time."""
    records = clients.dynamodb_table("user_records")
    requests_table = settings.table("deletion_requests")
    while True:
        page = _first_page(records, claim.user_id)
        items = [{"Delete": {"TableName": records.name, "Key": key}} for key in page]
        last = len(page) < DELETES_PER_TRANSACTION
        if last:
            items.append({"Update": claims.step_done_update(requests_table, claim, STEP, config.lease_seconds())})
        else:
            items.append({"Update": claims.lease_renewal(requests_table, claim, config.lease_seconds())})
        # The claim's write is the last action: its condition failing means we were fenced.
        claims.fenced_transaction(config.transact_write, items, claim, STEP)
        if last:
            return True
        if time_is_short(context):
            return False


def _first_page(records, user_id: str) -> list[dict]:
    # Always from the start: what earlier pages deleted is gone, so the first page is
    # what is left, and no cursor has to survive a crash.
    return records.query(
        KeyConditionExpression=Key("user_id").eq(user_id),
        ProjectionExpression="user_id, record_id",
        ConsistentRead=True,
        Limit=DELETES_PER_TRANSACTION,
    ).get("Items", [])
