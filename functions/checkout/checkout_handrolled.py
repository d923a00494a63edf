"""Checkout, hand-rolled idempotency: check the key, charge, record the key.

Wrong in two ways. When two copies arrive together, both read "no record", both charge,
both record:

    copy A: |check: none|......window......|charge|record|
    copy B:   |check: none|......window......|charge|record|

The window is the time between the check and the record; the request's
check_act_delay_ms stretches it so the race shows every time.

And even one request at a time: an invocation that dies after the charge and before
the record (a timeout, an out-of-memory kill) leaves no record, so the next retry finds
none and charges again:

    attempt 1: |check: none|charge|  (dies)
    attempt 2:                         |check: none|charge|record|

Only a key passed on to the card processor (``pass_key_downstream``) closes that gap.
"""

from __future__ import annotations

import time

import boto3

from charging import faults, outcomes, processor, request
from charging.errors import CheckoutError, InvalidRequestError, PayloadMismatchError
from charging.response import answer, refused
from charging.trace import CHARGE, CHECK, RECORD, Trace
from shared import settings

STRATEGY = "handrolled"

dynamodb = boto3.client("dynamodb")


def handler(event, context):
    trace = Trace()
    try:
        order = request.parse(event)
    except InvalidRequestError as exc:
        return refused(STRATEGY, trace, exc)
    table = settings.table("handrolled_idempotency")
    key = {"idempotency_key": {"S": order.idempotency_key}}

    with trace.step(CHECK):
        earlier = dynamodb.get_item(TableName=table, Key=key, ConsistentRead=True).get("Item")
    if earlier is not None:
        if int(earlier["amount"]["N"]) != order.amount or earlier["currency"]["S"] != order.currency:
            mismatch = PayloadMismatchError(
                f"idempotency key {order.idempotency_key!r} was used with another amount or currency"
            )
            return refused(STRATEGY, trace, mismatch)
        return answer(STRATEGY, outcomes.REPLAYED, trace, earlier["charge_id"]["S"])

    time.sleep(request.check_act_delay_ms(order) / 1000)  # the race window, widened on purpose

    try:
        with trace.step(CHARGE):
            charge = processor.charge(order)
            faults.strike(faults.AFTER_CHARGE, order.idempotency_key, context)
    except CheckoutError as exc:  # refused (nothing charged) or unknown (perhaps charged)
        return refused(STRATEGY, trace, exc)

    with trace.step(RECORD):
        # Unconditional on purpose: the lesson's race. A later copy overwrites the first.
        dynamodb.put_item(
            TableName=table,
            Item={
                **key,
                "charge_id": {"S": charge["charge_id"]},
                "amount": {"N": str(order.amount)},
                "currency": {"S": order.currency},
                "recorded_at": {"N": repr(time.time())},
            },
        )
    return answer(STRATEGY, outcomes.CHARGED, trace, charge["charge_id"], processor_replayed=charge["replayed"])
