"""Lesson 7 exercise: choose the idempotency key and how long its record lives.

The learner writes ``key_and_lifetime()``, returning the two Powertools settings of the
keyed checkout (``functions/checkout/checkout_keyed.py``)::

    {"event_key_jmespath": "<JMESPath over the delivery>", "expires_after_seconds": <int>}

``exercise(stack).check(key_and_lifetime)`` deploys the checkout with those settings as
a Lambda function on the learner's backend and attacks it with real deliveries: copies
sent together, a retry with a new trace id, another order from the same customer, and a
redrive at the end of a dead-letter queue's retention. Time is compressed for the
redrive: one real second stands for one day.
"""

from __future__ import annotations

import time
from typing import Any, Callable

from idemlab.exercises import Exercise, ExerciseFailed
from idemlab.lessons.traps import DAY, DLQ_MAX_RETENTION_SECONDS, KeyedCheckouts, Variant, delivery, new_order_id, retry_of

# Compressed time: one real second stands for one day, so a 14-day redrive takes 14 s.
SECONDS_PER_DAY = 1.0
# The scenario: a queue retries a failed checkout for up to a day (maxReceiveCount x the
# visibility timeout), then its dead-letter queue keeps the message for the 14-day maximum.
RETRY_WINDOW_SECONDS = 1 * DAY
HORIZON_SECONDS = RETRY_WINDOW_SECONDS + DLQ_MAX_RETENTION_SECONDS
# When the operator redrives the dead letter: on its last day in the DLQ.
REDRIVE_AFTER_DAYS = 14
COPIES_TOGETHER = 3

HINT = """\
Two settings, two traps.
The key: hash only what stays the same on every attempt of one order. The whole
delivery ("@", or "" which is Powertools' default) includes the trace id, which is new
on every attempt, so every retry looks new. Either the key the client sends
(headers."Idempotency-Key", the same on its retries) or a key the server derives from the
order: body.[customer_id, order_id]. Not the customer alone: their next order is a new charge.
The lifetime: a retry can come back as long as a redrive can, here 1 day of queue retries
plus 14 days in the dead-letter queue. Powertools' default is 1 hour (60 * 60)."""


def defaults() -> dict:
    """The starting point: Powertools' defaults, the whole event for 1 hour."""
    return {"event_key_jmespath": "", "expires_after_seconds": 60 * 60}


def key_and_lifetime() -> dict:
    return {
        # The order identifies the charge: the same on every attempt, new for every order.
        "event_key_jmespath": "body.[customer_id, order_id]",
        # Longer than the longest way back: a day of retries plus 14 days in the DLQ.
        "expires_after_seconds": 15 * 24 * 60 * 60,
    }


def exercise(stack: dict) -> Exercise:
    return Exercise(
        title="Choose the key, and how long it lives",
        hint_text=HINT,
        solution_fn=key_and_lifetime,
        verify=lambda candidate: verify(candidate, stack),
    )


def verify(candidate: Callable[[], dict], stack: dict) -> str:
    chosen = _settings(candidate)
    variant = Variant(
        name="exercise",
        key=chosen["event_key_jmespath"],
        # The deployed record lives the compressed length of what was chosen.
        expires_after_seconds=int(chosen["expires_after_seconds"] / DAY * SECONDS_PER_DAY),
    )
    shop = KeyedCheckouts(stack)
    shop.deploy(variant)
    try:
        return _attack(shop, variant, chosen)
    finally:
        shop.remove()


def _settings(candidate: Callable[[], dict]) -> dict:
    try:
        chosen = candidate()
    except Exception as exc:
        raise ExerciseFailed(f"key_and_lifetime() raised {type(exc).__name__}: {exc}") from exc
    if not isinstance(chosen, dict) or set(chosen) != {"event_key_jmespath", "expires_after_seconds"}:
        raise ExerciseFailed(f"return a dict with event_key_jmespath and expires_after_seconds, got {chosen!r}")
    key, expiry = chosen["event_key_jmespath"], chosen["expires_after_seconds"]
    if not isinstance(key, str):
        raise ExerciseFailed(f"event_key_jmespath must be a string (a JMESPath expression), got {key!r}")
    if isinstance(expiry, bool) or not isinstance(expiry, int) or expiry < 0:
        raise ExerciseFailed(f"expires_after_seconds must be a whole number of seconds, got {expiry!r}")
    try:
        import jmespath

        jmespath.compile(key or "@")
    except Exception as exc:
        raise ExerciseFailed(f"event_key_jmespath {key!r} is not a JMESPath expression: {exc}") from exc
    return chosen


def _attack(shop: KeyedCheckouts, variant: Variant, chosen: dict) -> str:
    order_id = new_order_id("exercise")
    first = delivery(order_id, key=f"client-{order_id}")
    answers = shop.send_together(variant, [first] * COPIES_TOGETHER)
    _expect(shop, order_id, 1, f"{COPIES_TOGETHER} copies of one delivery sent together", answers)

    retry = retry_of(first)
    _expect(shop, order_id, 1, "a retry of the order (same body and Idempotency-Key, a new X-Amzn-Trace-Id)", [shop.send(variant, retry)])

    other = new_order_id("exercise")
    _expect(shop, other, 1, "another order from the same customer, same amount", [shop.send(variant, delivery(other, key=f"client-{other}"))])

    time.sleep(REDRIVE_AFTER_DAYS * SECONDS_PER_DAY)
    redriven = shop.send(variant, retry_of(first))
    _expect(shop, order_id, 1, f"the dead letter redriven on day {REDRIVE_AFTER_DAYS} (compressed: {REDRIVE_AFTER_DAYS} s)", [redriven])

    if chosen["expires_after_seconds"] < HORIZON_SECONDS:
        raise ExerciseFailed(
            f"the record lives {chosen['expires_after_seconds']} s, {chosen['expires_after_seconds'] / DAY:.2f} days; a delivery "
            f"can come back for {HORIZON_SECONDS // DAY} days (1 day of retries + 14 days in the DLQ): a redrive on the last "
            "day would charge again"
        )
    return (
        f"{COPIES_TOGETHER} copies together, a retry with a new trace id and a redrive on day {REDRIVE_AFTER_DAYS} charged "
        "once; another order was charged on its own"
    )


def _expect(shop: KeyedCheckouts, order_id: str, wanted: int, what: str, answers: list[Any]) -> None:
    charges = shop.charges(order_id)
    if charges == wanted:
        return
    outcomes = ", ".join(str(a.get("outcome")) for a in answers)
    if charges > wanted:
        why = "the key changed between attempts, or the record had expired"
    else:
        why = "the key is the same for different orders, so this order was answered with another order's charge"
    raise ExerciseFailed(f"after {what}: {charges} charges for order {order_id}, expected {wanted} (answers: {outcomes}); {why}")
