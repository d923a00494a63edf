"""Checkout with Powertools for AWS Lambda's idempotency utility.

The check and the record become one conditional write: the first copy of a request
puts an INPROGRESS record for its key, and every other copy's put fails at once, so
only one copy ever reaches the charge. The others answer "already in progress" (while
the first runs) or replay its stored result (after it finished).

The in-progress record expires when the claiming invocation's time is up (that is why
the Lambda context is registered: Powertools stores the remaining time as
``in_progress_expiration``). A copy that timed out after charging therefore stops
blocking its key the moment it is stopped, and the retry charges again. When the
processor's answer is lost, the body raises, Powertools deletes the in-progress record,
and the retry charges again too. Only an idempotency key passed on to the card
processor (``pass_key_downstream``) closes that last gap.
"""

from __future__ import annotations

import os
import time

from aws_lambda_powertools.utilities.idempotency import (
    DynamoDBPersistenceLayer,
    IdempotencyConfig,
    idempotent_function,
)

from charging import faults, processor, request
from charging.claims import answer_claim
from charging.trace import CHARGE, CHECK, RECORD, Trace
from shared import settings

STRATEGY = "powertools"

persistence = DynamoDBPersistenceLayer(table_name=settings.table("powertools_idempotency"))
config = IdempotencyConfig(
    event_key_jmespath="idempotency_key",
    # The same key with another amount or currency is a client bug, not a retry.
    payload_validation_jmespath="[amount, currency]",
    raise_on_no_idempotency_key=True,
    # A day covers any client's retry horizon; the TTL attribute then clears the record.
    expires_after_seconds=24 * 60 * 60,
    # Off by default. The deployed checkout_powertools_cached turns it on, so the bench can
    # show what an in-memory copy of finished records saves on duplicates (and what it cannot).
    use_local_cache=os.environ.get("IDEMPOTENCY_LOCAL_CACHE") == "true",
)


@idempotent_function(data_keyword_argument="payment", persistence_store=persistence, config=config)
def charge_once(payment: dict, order: request.ChargeRequest, trace: Trace, context) -> dict:
    trace.end(CHECK)  # the in-progress record is ours: the check is over
    # The same widened window as the hand-rolled checkout: here it cannot hurt.
    time.sleep(request.check_act_delay_ms(order) / 1000)
    with trace.step(CHARGE):
        charge = processor.charge(order)
        faults.strike(faults.AFTER_CHARGE, order.idempotency_key, context)
    trace.begin(RECORD)  # Powertools stores the result after we return
    return {"charge_id": charge["charge_id"], "processor_replayed": charge["replayed"]}


def handler(event, context):
    # Without this the in-progress record never expires before the whole record does.
    config.register_lambda_context(context)
    trace = Trace()
    return answer_claim(STRATEGY, trace, lambda: _claim_and_charge(request.parse(event), trace, context))


def _claim_and_charge(order: request.ChargeRequest, trace: Trace, context) -> dict:
    trace.begin(CHECK)
    try:
        return charge_once(payment=order.payment(), order=order, trace=trace, context=context)
    finally:
        trace.end(CHECK)  # still open when Powertools answered without running the body
        trace.end(RECORD)
