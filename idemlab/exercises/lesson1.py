"""Lesson 1 exercise: the conditional put that makes the vehicle write idempotent.

The learner writes ``register_once(table, registration)``: store the registration unless
a row with its ``request_id`` already exists, and return whichever registration is stored.
``exercise(stack).check(register_once)`` runs it against the deployed ``vehicles`` table.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timezone
from typing import Any, Callable

from idemlab.barrier import settled
from idemlab.exercises import Exercise, ExerciseFailed, attempt, table
from idemlab.lessons.vehicles import VALID_VIN

# Simultaneous attempts per round, and rounds: a get-then-put answer lets two attempts
# through in most rounds, so three rounds of eight make a lucky pass very unlikely.
RACERS = 8
ROUNDS = 3
# What a learner whose attempt raised should do instead.
ALREADY_STORED = (
    ". A failed condition means an earlier attempt already stored the registration: return that one instead of raising"
)

HINT = """\
A plain put_item replaces whatever row has the same key. Give it a
ConditionExpression that only holds while no row has this request_id:
    ConditionExpression="attribute_not_exists(request_id)"
When the condition fails, boto3 raises
table.meta.client.exceptions.ConditionalCheckFailedException. That is not an error
here: an earlier attempt already registered the vehicle, so read that row
(get_item with ConsistentRead=True) and return it. Let every other error propagate."""


def naive_register(table: Any, registration: dict) -> dict:
    """The starting point: every attempt overwrites the row and claims to be the first."""
    table.put_item(Item=registration)
    return registration


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


def exercise(stack: dict) -> Exercise:
    """The exercise, bound to the deployed ``vehicles`` table of ``stack`` (the lab outputs)."""
    return Exercise("Register a vehicle once per request", HINT, register_once, verify, stack["tables"]["vehicles"])


def verify(candidate: Callable[[Any, dict], dict], table_name: str) -> str:
    """Run ``candidate`` as a first attempt, a retry and a race; ExerciseFailed says what broke."""
    _first_attempt_and_retry(candidate, table(table_name))
    _other_errors_propagate(candidate, table(table_name))
    for round_number in range(1, ROUNDS + 1):
        _race(candidate, table_name, round_number)
    return (
        "a retry returns the first registration and leaves it in place, and "
        f"{RACERS} simultaneous attempts agreed on one stored registration in each of {ROUNDS} rounds"
    )


def _first_attempt_and_retry(candidate: Callable, vehicles: Any) -> None:
    request_id = f"exercise-{uuid.uuid4().hex[:12]}"
    first, retry = _registration(request_id), _registration(request_id)
    returned = attempt(candidate, vehicles, first, what="the first attempt", advice=ALREADY_STORED)
    if returned != first:
        raise ExerciseFailed(f"the first attempt should return the registration it stored, got {returned!r}")
    returned = attempt(candidate, vehicles, retry, what="the retry", advice=ALREADY_STORED)
    stored = _stored(vehicles, request_id)
    if stored != first:
        raise ExerciseFailed(
            f"the retry replaced the stored registration ({first['registration_id']} became "
            f"{stored['registration_id']}): a put without a condition overwrites the row"
        )
    if returned != first:
        got = returned.get("registration_id") if isinstance(returned, dict) else returned
        raise ExerciseFailed(
            f"the retry returned registration {got!r}; it should return the stored one, {first['registration_id']}"
        )


def _race(candidate: Callable, table_name: str, round_number: int) -> None:
    request_id = f"exercise-race-{uuid.uuid4().hex[:12]}"
    attempts = [_registration(request_id) for _ in range(RACERS)]
    # A Table per thread; an exception is reported below, as the learner's outcome.
    returned = settled([lambda t=table(table_name), r=r: candidate(t, r) for r in attempts])
    errors = [r for r in returned if isinstance(r, Exception)]
    if errors:
        raise ExerciseFailed(
            f"round {round_number}: {len(errors)} of {RACERS} simultaneous attempts raised "
            f"{type(errors[0]).__name__}: {errors[0]}"
        )
    stored = _stored(table(table_name), request_id)
    answers = {r.get("registration_id") if isinstance(r, dict) else repr(r) for r in returned}
    if answers != {stored["registration_id"]}:
        raise ExerciseFailed(
            f"round {round_number}: {RACERS} simultaneous attempts returned {len(answers)} different "
            f"registrations, and only one of them is stored. Reading first and writing after lets "
            "several attempts see no row; the condition must be part of the write itself"
        )


def _other_errors_propagate(candidate: Callable, vehicles: Any) -> None:
    broken = {"registration_id": "no-request-id"}  # no key attribute: DynamoDB refuses it
    try:
        returned = candidate(vehicles, broken)
    except Exception:
        return
    raise ExerciseFailed(
        f"a write DynamoDB refused (the item had no request_id) returned {returned!r}; only "
        "ConditionalCheckFailedException means 'already registered', other errors must propagate"
    )


def _stored(vehicles: Any, request_id: str) -> dict:
    item = vehicles.get_item(Key={"request_id": request_id}, ConsistentRead=True).get("Item")
    if item is None:
        raise ExerciseFailed(f"nothing was stored for request_id {request_id!r}")
    return item


def _registration(request_id: str) -> dict:
    """One attempt's registration: same request, fresh registration id."""
    return {
        "request_id": request_id,
        "registration_id": str(uuid.uuid4()),
        "vin": VALID_VIN,
        "owner": "Exercise Learner",
        "registered_at": datetime.now(timezone.utc).isoformat(timespec="milliseconds"),
    }
