"""Lesson 2 exercise (notebook 02): claim the idempotency key before charging, not after.

``charge_once(table, order, charge_card)`` charges at most once per ``order["idempotency_key"]``
and returns the charge id. ``table`` is the deployed ``handrolled_idempotency`` table (hash key
``idempotency_key``); ``charge_card(order)`` charges through the deployed card processor, with
no downstream key, and returns the new charge id. ``exercise(stack).check(charge_once)`` runs it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from idemlab.barrier import settled
from idemlab.exercises import RACERS, ROUNDS, Exercise, attempt, expect, table
from idemlab.lessons.checkout import Checkout, order

HINT = """\
Reading the table first cannot work: eight attempts all read "no record" before any
of them writes one. Make the claim the first write, and make it conditional:
    table.put_item(Item={"idempotency_key": key, "status": "IN_PROGRESS"},
                   ConditionExpression="attribute_not_exists(idempotency_key)")
Only the attempt whose put succeeds may call charge_card; afterwards it stores the
charge id on the record (update_item). An attempt whose put fails with
table.meta.client.exceptions.ConditionalCheckFailedException must not charge: it reads
the record and returns its charge_id, or raises ChargeInProgress when there is none yet."""


class ChargeInProgress(Exception):
    """Another attempt holds this order's key and has not recorded its charge yet."""


def charge_once(table: Any, order: dict, charge_card: Callable[[dict], str]) -> str:
    key = {"idempotency_key": order["idempotency_key"]}
    try:
        # The claim is the check: only one attempt's conditional put can succeed.
        table.put_item(
            Item={**key, "status": "IN_PROGRESS"}, ConditionExpression="attribute_not_exists(idempotency_key)"
        )
    except table.meta.client.exceptions.ConditionalCheckFailedException:
        stored = table.get_item(Key=key, ConsistentRead=True)["Item"]
        if "charge_id" in stored:
            return stored["charge_id"]
        raise ChargeInProgress(f"order {order['idempotency_key']} is being charged; retry later") from None
    charge_id = charge_card(order)
    table.update_item(
        Key=key,
        UpdateExpression="SET charge_id = :charge, #status = :done",
        ExpressionAttributeNames={"#status": "status"},
        ExpressionAttributeValues={":charge": charge_id, ":done": "COMPLETED"},
    )
    return charge_id


def verify(candidate: Callable[[Any, dict, Callable], str], stack: dict) -> str:
    """Run ``candidate`` as a first attempt, a retry and races; ExerciseFailed says what broke."""
    shop = Checkout(stack)
    tables = [table(stack, "handrolled_idempotency") for _ in range(RACERS)]  # one per thread
    request = order(prefix="exercise")
    first, retry = (
        attempt(candidate, tables[0], request, shop.charge_card, what=what)
        for what in ("the first attempt", "the retry")
    )
    charges = shop.charges(request)
    expect(charges == 1, f"a first attempt and one retry made {charges} charges; a retry must not charge again")
    expect(
        first == retry == shop.ledger.charge_ids(request["idempotency_key"])[0],
        f"first attempt returned {first!r} and the retry {retry!r}; both must return the one charge id",
    )
    for round_number in range(1, ROUNDS + 1):
        request = order(prefix="exercise-race")
        # An attempt told to retry later (an exception) is a fine answer.
        returned = settled([lambda t=t: candidate(t, request, shop.charge_card) for t in tables])
        charges = shop.charges(request)
        made = f"round {round_number}: {RACERS} simultaneous attempts made"
        expect(
            charges <= 1,
            f"{made} {charges} charges. Reading first and writing after lets several attempts "
            "see no record; the claim must be a conditional write",
        )
        expect(charges == 1, f"{made} 0 charges; the winning claim must charge")
        charge_id = shop.ledger.charge_ids(request["idempotency_key"])[0]
        wrong = [r for r in returned if not isinstance(r, Exception) and r != charge_id]
        expect(not wrong, f"round {round_number}: attempts returned {wrong[:3]}, but the one charge is {charge_id}")
    return (
        f"a retry returns the first charge, and {RACERS} simultaneous attempts charged once in each of {ROUNDS} rounds"
    )


exercise = Exercise("Charge a card once per idempotency key", HINT, charge_once, verify)
