"""Checkout behind a delivery envelope, with Powertools, where the key and its lifetime
are configuration: which fields make the idempotency key, and how long its record lives.

A delivery looks like what an HTTP front door or a queue hands a function::

    {"headers": {"Idempotency-Key": "k-1", "X-Amzn-Trace-Id": "Root=1-..."},
     "body": {"order_id": "o-1", "customer_id": "c-1", "amount": 1999, "currency": "EUR"}}

Headers change between attempts (every attempt gets its own trace id); the body does
not. Two settings decide whether a retry is recognised:

- ``IDEMPOTENCY_KEY_JMESPATH``: the JMESPath expression Powertools hashes into the key
  (``event_key_jmespath``). ``@`` is the whole delivery, trace id included, so every
  attempt looks new. ``headers."Idempotency-Key"`` is the key the client chose;
  ``body.[customer_id, order_id]`` is a key the server derives from the order itself.
- ``IDEMPOTENCY_EXPIRES_AFTER_SECONDS``: how long a finished record answers for its key
  (``expires_after_seconds``). A delivery that comes back after that, a redrive from a
  dead-letter queue for instance, is charged again.

``PASS_KEY_DOWNSTREAM=true`` also sends the order id to the card processor as its own
idempotency key, which never expires there: the last line of defence.
"""

from __future__ import annotations

import os
from typing import Any

from aws_lambda_powertools.utilities.idempotency import (
    DynamoDBPersistenceLayer,
    IdempotencyConfig,
    idempotent_function,
)

from charging import processor, request
from charging.claims import answer_claim
from charging.errors import InvalidRequestError
from charging.trace import CHARGE, Trace
from shared import settings

STRATEGY = "keyed"

# The order identifies the charge: a server-derived key needs no help from the client.
DEFAULT_KEY = "body.[customer_id, order_id]"
# Long enough to outlive a queue's retries and a dead-letter queue's 14-day retention.
DEFAULT_EXPIRY_SECONDS = 15 * 24 * 60 * 60
BODY_FIELDS = ("order_id", "customer_id", "amount", "currency")


def _expiry_seconds() -> int:
    configured = os.environ.get("IDEMPOTENCY_EXPIRES_AFTER_SECONDS") or str(DEFAULT_EXPIRY_SECONDS)
    try:
        seconds = int(configured)
    except ValueError as exc:
        raise RuntimeError(
            f"IDEMPOTENCY_EXPIRES_AFTER_SECONDS={configured!r} is not a whole number of seconds"
        ) from exc
    if seconds < 0:
        raise RuntimeError(f"IDEMPOTENCY_EXPIRES_AFTER_SECONDS={seconds} must not be negative")
    return seconds


persistence = DynamoDBPersistenceLayer(table_name=settings.table("powertools_idempotency"))
config = IdempotencyConfig(
    event_key_jmespath=os.environ.get("IDEMPOTENCY_KEY_JMESPATH", DEFAULT_KEY),
    # The same key with another amount or currency is a client bug, not a retry.
    payload_validation_jmespath="body.[amount, currency]",
    raise_on_no_idempotency_key=True,
    expires_after_seconds=_expiry_seconds(),
)
PASS_KEY_DOWNSTREAM = os.environ.get("PASS_KEY_DOWNSTREAM") == "true"


@idempotent_function(data_keyword_argument="delivery", persistence_store=persistence, config=config)
def charge_once(delivery: dict, order: request.ChargeRequest, trace: Trace) -> dict:
    with trace.step(CHARGE):
        charge = processor.charge(order)
    return {"charge_id": charge["charge_id"], "processor_replayed": charge["replayed"]}


def handler(event, context):
    config.register_lambda_context(context)
    trace = Trace()
    return answer_claim(STRATEGY, trace, lambda: charge_once(delivery=event, order=parse(event), trace=trace))


def parse(event: Any) -> request.ChargeRequest:
    """The charge a delivery asks for; InvalidRequestError says what is wrong with it.

    The card processor's reference is the order id, so the ledger counts charges per order.
    """
    if (
        not isinstance(event, dict)
        or not isinstance(event.get("headers", {}), dict)
        or not isinstance(event.get("body"), dict)
    ):
        raise InvalidRequestError("a delivery is a JSON object with a 'body' object and optional 'headers' object")
    body = event["body"]
    missing = [name for name in BODY_FIELDS if body.get(name) is None]
    if missing:
        raise InvalidRequestError(f"body is missing field(s): {', '.join(missing)}")
    unknown = sorted(set(body) - set(BODY_FIELDS))
    if unknown:
        raise InvalidRequestError(f"unknown body field(s) {', '.join(unknown)}; allowed: {', '.join(BODY_FIELDS)}")
    if not isinstance(body["customer_id"], str) or not body["customer_id"].strip():
        raise InvalidRequestError("customer_id must be a non-empty string")
    return request.parse(
        {
            "idempotency_key": body["order_id"],
            "amount": body["amount"],
            "currency": body["currency"],
            "pass_key_downstream": PASS_KEY_DOWNSTREAM,
        }
    )
