"""Lesson 7 exercises (notebook 07), both checked with real deliveries on the learner's backend.

``exercise(stack).check(key_and_lifetime)``: the two Powertools settings of the keyed checkout
(``functions/checkout/checkout_keyed.py``), ``{"event_key_jmespath": ..., "expires_after_seconds": ...}``,
deployed; the late redrive runs in compressed time (one real second per chosen day).
``downstream_exercise(stack).check(charge)``: the learner's ``charge(event, context)``,
deployed as a Lambda function of its own, passing the key downstream.
"""

from __future__ import annotations

import inspect
import tempfile
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jmespath

from idemlab.exercises import Exercise, ExerciseFailed, attempt, expect
from idemlab.lessons import FunctionFailed
from idemlab.lessons.checkout import concurrently
from idemlab.lessons.keys import (
    DAY,
    REDRIVE_HORIZON_SECONDS,
    KeyedCheckouts,
    Variant,
    delivery,
    new_order_id,
    retry_of,
)

# Compressed time: one real second stands for one day, so a 14-day redrive takes 14 s.
SECONDS_PER_DAY = 1.0
# The scenario: a standard queue retries a failed checkout for up to a day (maxReceiveCount
# x the visibility timeout), then its dead-letter queue keeps the message at the 14-day
# maximum. The day of retries is inside those 14 days, not added to them: the DLQ's
# retention counts from the first send (idemlab/horizon.py has the model and its sources).
HORIZON_SECONDS = REDRIVE_HORIZON_SECONDS
# When the operator redrives the dead letter, counted from the first delivery's answer: late
# in its stay in the DLQ, four days short of the horizon. In compressed time those four days
# are four seconds between the redrive and the expiry of a record that lives the whole
# horizon, which the redrive's invocation and Powertools' whole-second expiry must fit in: one
# day's margin (day 13) was passed on LocalStack in a loaded CI run, and the redrive charged
# again. A lifetime between 10 and 14 days passes the redrive but not the check below it.
REDRIVE_AFTER_DAYS = 10
COPIES_TOGETHER = 3

HINT = """\
Two settings, two keys.
The key: hash only what stays the same on every attempt of one order. The whole
delivery ("@", or "" which is Powertools' default) includes the trace id, which is new
on every attempt, so every retry looks new. Either the key the client sends
(headers."Idempotency-Key", the same on its retries) or a key the server derives from the
order: body.[customer_id, order_id]. Not the customer alone: their next order is a new charge.
The lifetime: a retry can come back as long as a redrive can: here 14 days after the
first send, the dead-letter queue's retention, which counts from the first send (the day
of queue retries is inside it). Powertools' default is 1 hour (60 * 60)."""


def key_and_lifetime() -> dict:
    return {
        # The order identifies the charge: the same on every attempt, new for every order.
        "event_key_jmespath": "body.[customer_id, order_id]",
        # As long as the longest way back: 14 days from the first send, the DLQ's retention
        # (one redrive; each further redrive would add up to 14 days more).
        "expires_after_seconds": 14 * 24 * 60 * 60,
    }


def verify(candidate: Callable[[], dict], stack: dict) -> str:
    key, expiry = _settings(candidate)
    # Two functions, one trap each: the key is attacked with the record living as long as
    # chosen, the lifetime in compressed time (a day per second).
    keyed = Variant(name="exercise-key", key=key, expires_after_seconds=expiry)
    compressed = Variant(name="exercise-lifetime", key=key, expires_after_seconds=int(expiry / DAY * SECONDS_PER_DAY))
    shop = KeyedCheckouts(stack)
    try:
        shop.deploy(keyed)
        shop.deploy(compressed)
        _copies_retry_and_another(shop, keyed, COPIES_TOGETHER, with_key=True)
        order_id = new_order_id("exercise-redrive")
        first = delivery(order_id, key=f"client-{order_id}")
        answers = [shop.send(compressed, first)]
        time.sleep(REDRIVE_AFTER_DAYS * SECONDS_PER_DAY)  # counted from the first delivery's answer
        answers.append(shop.send(compressed, retry_of(first)))
        redriven = f"the dead letter redriven on day {REDRIVE_AFTER_DAYS} (compressed: {REDRIVE_AFTER_DAYS} s)"
        _expect(shop, first, redriven, answers)
    finally:
        shop.remove()
    expect(
        expiry >= HORIZON_SECONDS,
        f"the record lives {expiry} s, {expiry / DAY:.2f} days; a delivery can come "
        f"back for {HORIZON_SECONDS // DAY} days after its first send (the dead-letter queue's retention counts "
        "from the first send, the day of retries included): a redrive on the last day would charge again",
    )
    return (
        f"{COPIES_TOGETHER} copies together, a retry with a new trace id and a redrive on day {REDRIVE_AFTER_DAYS} "
        "charged once; another order was charged on its own"
    )


exercise = Exercise("Choose the key, and how long it lives", HINT, key_and_lifetime, verify)


def _settings(candidate: Callable[[], dict]) -> tuple[str, int]:
    chosen = attempt(candidate, what="key_and_lifetime()")
    expect(
        isinstance(chosen, dict) and set(chosen) == {"event_key_jmespath", "expires_after_seconds"},
        f"return a dict with event_key_jmespath and expires_after_seconds, got {chosen!r}",
    )
    key = chosen["event_key_jmespath"]
    expiry = chosen["expires_after_seconds"]
    expect(isinstance(key, str), f"event_key_jmespath must be a string (a JMESPath expression), got {key!r}")
    expect(
        type(expiry) is int and expiry >= 0, f"expires_after_seconds must be a whole number of seconds, got {expiry!r}"
    )
    try:
        jmespath.compile(key or "@")
    except Exception as exc:
        raise ExerciseFailed(f"event_key_jmespath {key!r} is not a JMESPath expression: {exc}") from exc
    return key, expiry


def _copies_retry_and_another(
    shop: KeyedCheckouts, target: Variant | str, copies: int, with_key: bool, too_many: str | None = None
) -> dict:
    """``copies`` of one order together, a retry of it, then another order: each order charged
    once. With ``with_key`` every delivery carries the client's Idempotency-Key header."""
    first, other = (
        delivery(order_id, key=f"client-{order_id}" if with_key else None)
        for order_id in (new_order_id("exercise"), new_order_id("exercise"))
    )
    answers = concurrently(lambda: shop.send(target, first), copies)
    _expect(shop, first, f"{copies} copies of one delivery sent together", answers, too_many)
    retried = (
        "a retry of the order (same body and Idempotency-Key, a new X-Amzn-Trace-Id)"
        if with_key
        else "a retry with a new X-Amzn-Trace-Id"
    )
    _expect(shop, first, retried, [shop.send(target, retry_of(first))], too_many)
    _expect(shop, other, "another order from the same customer, same amount", [shop.send(target, other)])
    return first


def _outcome(answer: Any) -> str:
    """An answer in a word: the checkout's outcome, or (a learner's handler answering with the
    card processor's own answer) charged or replayed."""
    if isinstance(answer, dict) and ("outcome" in answer or "charge_id" in answer):
        return str(answer.get("outcome") or ("replayed" if answer.get("replayed") else "charged"))
    return repr(answer)[:80]


def _expect(shop: KeyedCheckouts, sent: dict, what: str, answers: list[Any], too_many: str | None = None) -> None:
    """The order of ``sent`` has exactly one charge after ``what``; else ExerciseFailed says why."""
    order_id = sent["body"]["order_id"]
    charges = shop.charges(order_id)
    why = too_many or "the key changed between attempts, or the record had expired"
    if not charges:
        why = "the key is the same for different orders, so this order was answered with another order's charge"
    expect(
        charges == 1,
        f"after {what}: {charges} charges for order {order_id}, expected 1 "
        f"(answers: {', '.join(map(_outcome, answers))}); {why}",
    )


# -- exercise 2: your handler, deployed: the key passed downstream -----------------------

DOWNSTREAM_HINT = """\
The card processor keeps the keys it has seen for good and answers a known key with the
first charge. Send it one: add "idempotency_key" to the call, built from what identifies
the order and stays the same on every attempt, e.g. event["body"]["order_id"]. Not the
trace id (new on every attempt) and not the customer alone (their next order would be
answered with the first one's charge). Keep the imports inside the function: the check
deploys this function's source as a module of its own."""

HANDLER_MODULE = "exercise_handler"
HANDLER_COPIES = 4
# In compressed time: the message waits this long in the DLQ before it is redriven.
DOWNSTREAM_REDRIVE_AFTER_SECONDS = 2.0
NO_KEY = "the card processor got no key, or a key that is new on every attempt, so it charged each one"


def charge_with_downstream_key(event, context):
    import json
    import os

    import boto3

    body = event["body"]
    call = {"reference": body["order_id"], "amount": body["amount"], "currency": body["currency"]}
    # The processor answers a key it has seen with the first charge, however late it comes.
    call["idempotency_key"] = f"{body['customer_id']}#{body['order_id']}"
    answer = boto3.client("lambda").invoke(FunctionName=os.environ["CARD_PROCESSOR_FUNCTION"], Payload=json.dumps(call))
    return json.loads(answer["Payload"].read())


def verify_downstream(candidate: Callable, stack: dict) -> str:
    shop = KeyedCheckouts(stack)
    label = "exercise-handler"
    shop.deploy_handler(label, handler_zip(candidate), f"{HANDLER_MODULE}.{candidate.__name__}")
    try:
        first = _copies_retry_and_another(shop, label, HANDLER_COPIES, with_key=False, too_many=NO_KEY)
        time.sleep(DOWNSTREAM_REDRIVE_AFTER_SECONDS)
        _expect(shop, first, "a redrive of the first delivery, later", [shop.send(label, retry_of(first))], NO_KEY)
    except FunctionFailed as exc:
        raise ExerciseFailed(f"your handler failed in Lambda: {exc}") from exc
    finally:
        shop.remove()
    return (
        f"{HANDLER_COPIES} copies together, a retry with a new trace id and a late redrive charged once; "
        "another order on its own"
    )


downstream_exercise = Exercise(
    "Pass the key downstream", DOWNSTREAM_HINT, charge_with_downstream_key, verify_downstream
)


def handler_zip(candidate: Callable) -> bytes:
    """The candidate's source as a module of its own, zipped by the take-home plugin's packer."""
    from idemlab.testing.handlers import zip_folder

    try:
        source = inspect.getsource(candidate)
    except (OSError, TypeError) as exc:
        raise ExerciseFailed(
            f"cannot read the source of {candidate!r}: define it with def in a cell of its own ({exc})"
        ) from exc
    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / f"{HANDLER_MODULE}.py").write_text(textwrap.dedent(source))
        return zip_folder(Path(folder), HANDLER_MODULE)
