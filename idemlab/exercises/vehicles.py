"""Lesson 1 exercise (notebook 01): ``register_once(table, registration)`` stores the registration
unless a row with its ``request_id`` exists, and returns whichever registration is stored; the
check runs it against the deployed ``vehicles`` table."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

from idemlab.barrier import settled
from idemlab.exercises import RACERS, ROUNDS, Exercise, attempt, expect, race, table
from idemlab.lessons.vehicles import VALID_VIN

# What a learner whose attempt raised should do instead.
ALREADY_STORED = ". A failed condition means an earlier attempt stored it: return the stored one instead of raising"

HINT = """\
A plain put_item replaces whatever row has the same key. Give it a
ConditionExpression that only holds while no row has this request_id:
    ConditionExpression="attribute_not_exists(request_id)"
When the condition fails, boto3 raises
table.meta.client.exceptions.ConditionalCheckFailedException. That is not an error
here: an earlier attempt already registered the vehicle, so read that row
(get_item with ConsistentRead=True) and return it. Let every other error propagate."""


def register_once(table: Any, registration: dict) -> dict:
    try:
        table.put_item(
            Item=registration,
            # Only the first attempt for this request creates the row.
            ConditionExpression="attribute_not_exists(request_id)",
        )
        return registration
    except table.meta.client.exceptions.ConditionalCheckFailedException:
        # Someone registered this request before us: their row is the answer.
        stored = table.get_item(Key={"request_id": registration["request_id"]}, ConsistentRead=True)
        return stored["Item"]


def verify(candidate: Callable[[Any, dict], dict], stack: dict) -> str:
    """Run ``candidate`` as a first attempt, a retry and a race; ExerciseFailed says what broke."""
    vehicles = table(stack, "vehicles")
    first, retry = _registrations(2)
    returned = attempt(candidate, vehicles, first, what="the first attempt", advice=ALREADY_STORED)
    expect(returned == first, f"the first attempt should return the registration it stored, got {returned!r}")
    returned = attempt(candidate, vehicles, retry, what="the retry", advice=ALREADY_STORED)
    stored = _stored(vehicles, first)
    expect(
        stored == first,
        f"the retry replaced the stored registration ({first['registration_id']} became "
        f"{stored['registration_id']}): a put without a condition overwrites the row",
    )
    expect(
        returned == first,
        f"the retry returned registration {_id_of(returned)!r}; it should return the "
        f"stored one, {first['registration_id']}",
    )
    returned = settled([lambda: candidate(vehicles, {"registration_id": "no-request-id"})])[0]  # DynamoDB refuses it
    expect(
        isinstance(returned, Exception),
        f"a write DynamoDB refused (the item had no request_id) returned "
        f"{returned!r}; only ConditionalCheckFailedException means 'already registered', "
        "other errors must propagate",
    )
    for round_number in range(1, ROUNDS + 1):
        attempts = _registrations(RACERS)
        # A Table per thread; an exception is reported as the learner's outcome.
        returned = race(candidate, [(table(stack, "vehicles"), r) for r in attempts], f"round {round_number}")
        answers = {_id_of(r) for r in returned}
        expect(
            answers == {_stored(vehicles, attempts[0])["registration_id"]},
            f"round {round_number}: {RACERS} simultaneous attempts returned {len(answers)} different registrations, "
            "and only one of them is stored. Reading first and writing after lets several attempts see no row; "
            "the condition must be part of the write itself",
        )
    return (
        f"a retry returns the first registration and leaves it in place, and {RACERS} simultaneous attempts "
        f"agreed on one stored registration in each of {ROUNDS} rounds"
    )


exercise = Exercise("Register a vehicle once per request", HINT, register_once, verify)


def _id_of(answer: Any) -> Any:
    return answer.get("registration_id") if isinstance(answer, dict) else repr(answer)


def _stored(vehicles: Any, registration: dict) -> dict:
    item = vehicles.get_item(Key={"request_id": registration["request_id"]}, ConsistentRead=True).get("Item")
    expect(item is not None, f"nothing was stored for request_id {registration['request_id']!r}")
    return item


def _registrations(attempts: int) -> list[dict]:
    """The registrations of ``attempts`` attempts at one new request, each with a fresh registration id."""
    request_id = f"exercise-{uuid.uuid4().hex[:12]}"
    at = datetime.now(timezone.utc).isoformat(timespec="milliseconds")
    return [
        {
            "request_id": request_id,
            "registration_id": str(uuid.uuid4()),
            "vin": VALID_VIN,
            "owner": "Exercise Learner",
            "registered_at": at,
        }
        for _ in range(attempts)
    ]
