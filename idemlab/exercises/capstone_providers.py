"""The two outside services the capstone's refund handler calls, as their client libraries
would be called from a Lambda function: a payment provider (`refund`) and a mail provider
(`send_email`). The checker puts this file into the handler's zip as `providers.py`, so a
handler does `import providers` and calls `providers.refund(...)`.

Each provider keeps what it did in a DynamoDB table of its own (the checker counts those
rows: they are the effects). Like many payment APIs, both honour an optional idempotency
key: a second call with a key the provider still remembers does nothing and answers what
the first call answered; the same key with a different request is refused
(`KeyReusedError`). A provider forgets a key after `KEY_LIFETIME_SECONDS` (one day), so a
key passed downstream protects a retry that comes soon, not a redrive days later.

The mail provider can be unavailable for a recipient (a mailbox that refuses mail for a
while, a provider outage): `send_email` then raises `MailUnavailableError` and sends
nothing. The checker marks such a recipient in `PROVIDER_OUTAGES_TABLE`.

The tables come from the function's environment: `REFUND_LEDGER_TABLE`, `MAIL_LOG_TABLE`,
`PROVIDER_KEYS_TABLE` and `PROVIDER_OUTAGES_TABLE`.
"""

from __future__ import annotations

import functools
import json
import os
import time
import uuid

import boto3

# How long a provider remembers an idempotency key: a day, after which the same key is new again.
KEY_LIFETIME_SECONDS = 24 * 60 * 60


@functools.cache
def _dynamodb():
    # Made on first use: importing this module sends nothing and needs no Region.
    return boto3.resource("dynamodb")


def _table(variable: str):
    """The provider's table named in the environment variable `variable`."""
    return _dynamodb().Table(os.environ[variable])


class KeyReusedError(ValueError):
    """An idempotency key the provider remembers came back with a different request."""


class MailUnavailableError(RuntimeError):
    """The mail provider cannot take an email for this recipient now: a temporary failure."""


def outage_key(to: str) -> str:
    """The item of `PROVIDER_OUTAGES_TABLE` that marks the mail provider unavailable for `to`."""
    return f"mail#{to}"


def refund(payment_id: str, amount: int, currency: str, idempotency_key: str | None = None) -> dict:
    """Refund `amount` minor units (cents) of `currency` to the card behind `payment_id`.
    Returns {"refund_ref": ..., "amount": ..., "replayed": bool}."""
    if not isinstance(amount, int) or isinstance(amount, bool) or amount <= 0:
        raise ValueError(f"amount must be a positive whole number of minor units, not {amount!r}")
    if not isinstance(payment_id, str) or not payment_id:
        raise ValueError(f"payment_id must be a non-empty string, not {payment_id!r}")
    request = {"payment_id": payment_id, "amount": amount, "currency": currency}
    answer = {"refund_ref": f"re_{uuid.uuid4().hex}", "amount": amount}
    earlier = _remember("payments", idempotency_key, request, answer)
    if earlier is not None:
        return {**earlier, "replayed": True}
    ledger = _table("REFUND_LEDGER_TABLE")
    ledger.put_item(Item={"entry_id": answer["refund_ref"], **request, "at": int(time.time())})
    return {**answer, "replayed": False}


def send_email(to: str, subject: str, body: str, idempotency_key: str | None = None) -> dict:
    """Send one email. Returns {"message_ref": ..., "replayed": bool}; raises
    MailUnavailableError, having sent nothing, while the provider cannot take it."""
    if not isinstance(to, str) or "@" not in to:
        raise ValueError(f"to must be an email address, not {to!r}")
    # Checked before the key is remembered: a refused email leaves nothing behind.
    outages = _table("PROVIDER_OUTAGES_TABLE")
    if "Item" in outages.get_item(Key={"outage_id": outage_key(to)}, ConsistentRead=True):
        raise MailUnavailableError(f"mail: cannot send to {to} now; try again later")
    request = {"to": to, "subject": subject, "body": body}
    answer = {"message_ref": f"msg_{uuid.uuid4().hex}"}
    earlier = _remember("mail", idempotency_key, request, answer)
    if earlier is not None:
        return {**earlier, "replayed": True}
    log = _table("MAIL_LOG_TABLE")
    log.put_item(Item={"message_id": answer["message_ref"], **request, "at": int(time.time())})
    return {**answer, "replayed": False}


def _remember(service: str, key: str | None, request: dict, answer: dict) -> dict | None:
    """Claim `key` for this request in one conditional write; None when this call is the
    first (go on), the first call's answer when the key is remembered for the same request."""
    if key is None:
        return None
    if not isinstance(key, str) or not key:
        raise ValueError(f"idempotency_key must be a non-empty string, not {key!r}")
    keys = _table("PROVIDER_KEYS_TABLE")
    now = int(time.time())
    stored_key = f"{service}#{key}"
    item = {
        "idempotency_key": stored_key,
        "request": json.dumps(request, sort_keys=True),
        "answer": json.dumps(answer, sort_keys=True),
        "expiration": now + KEY_LIFETIME_SECONDS,
    }
    try:
        # A key past its lifetime counts as forgotten, even before the table's TTL deletes it.
        keys.put_item(
            Item=item,
            ConditionExpression="attribute_not_exists(idempotency_key) OR expiration < :now",
            ExpressionAttributeValues={":now": now},
        )
        return None
    except keys.meta.client.exceptions.ConditionalCheckFailedException:
        stored = keys.get_item(Key={"idempotency_key": stored_key}, ConsistentRead=True)["Item"]
    if stored["request"] != item["request"]:
        raise KeyReusedError(
            f"{service}: idempotency key {key!r} was first used for {stored['request']}, now for {item['request']}"
        )
    return json.loads(stored["answer"])
