"""Lesson 3 exercises: the fenced progress write (notebook 03) and the goodbye email sent
once (notebook 04).

``fenced_write_exercise(stack).check(record_step)`` runs the learner's progress write
against the deployed ``deletion_requests`` table; ``goodbye_exercise(stack).check(send_goodbye)``
runs the learner's email step against the deployed ``email_outbox`` table.
"""

from __future__ import annotations

import time
import uuid
from typing import Any, Callable

from idemlab.barrier import all_at_once
from idemlab.exercises import Exercise, ExerciseFailed, attempt, table
from idemlab.lessons import deletion

state = deletion.import_function_module("deletion_state")

LEASE = 30  # the exercise moves its own clock, so the length only sets the scale
# Rounds of a zombie and the holder writing at the same moment: a write whose condition
# is checked outside DynamoDB lets the zombie through in most rounds, so a lucky pass of
# all of them is very unlikely.
RACE_ROUNDS = 5
GOODBYE_RACERS = 8
# What a learner whose write raised should do instead.
FENCED_OUT = ". A failed condition means this worker no longer holds the claim: return False instead of raising"
ALREADY_SENT = ". A failed condition means an earlier attempt already sent the email: return False instead of raising"

# -- exercise 1: the fenced progress write --------------------------------------------

FENCED_HINT = """\
An update without a condition lands whoever sends it. Let DynamoDB check, inside the
write, that the sender still holds the claim:
    ConditionExpression="#s = :processing AND fencing_token = :token"
with ExpressionAttributeNames={"#s": "status"} (status is a reserved word) and
":processing": "PROCESSING", ":token": fencing_token. When the condition fails, boto3
raises table.meta.client.exceptions.ConditionalCheckFailedException: a newer claim (or
a sweep, or the end of the request) superseded this worker, so return False. Reading
the item first and deciding in Python is not enough: the claim can change between
your read and your write."""


def naive_record_step(table: Any, deletion_request_id: str, fencing_token: int, step: str) -> bool:
    """The starting point: records the step whoever asks, zombie or not."""
    table.update_item(
        Key={"deletion_request_id": deletion_request_id},
        UpdateExpression="ADD steps_done :step",
        ExpressionAttributeValues={":step": {step}},
    )
    return True


def record_step(table: Any, deletion_request_id: str, fencing_token: int, step: str) -> bool:
    try:
        table.update_item(
            Key={"deletion_request_id": deletion_request_id},
            UpdateExpression="ADD steps_done :step",
            # Only the current holder of the claim may record progress.
            ConditionExpression="#s = :processing AND fencing_token = :token",
            ExpressionAttributeNames={"#s": "status"},
            ExpressionAttributeValues={":step": {step}, ":processing": "PROCESSING", ":token": fencing_token},
        )
        return True
    except table.meta.client.exceptions.ConditionalCheckFailedException:
        return False  # superseded: a newer claim holds the request


def fenced_write_exercise(stack: dict) -> Exercise:
    title = "Record progress only while holding the claim"
    return Exercise(title, FENCED_HINT, record_step, verify_fenced_write, stack["tables"]["deletion_requests"])


def verify_fenced_write(candidate: Callable[[Any, str, int, str], bool], table_name: str) -> str:
    requests = table(table_name)
    now = time.time()
    request_id = _new_request(requests)
    holder = state.claim(requests, request_id, "worker-a", LEASE, now=now).claim
    answer = _write(candidate, requests, request_id, holder.fencing_token, "delete_records", "the holder's write")
    if answer is not True:
        raise ExerciseFailed("the holder of the claim wrote progress and got something other than True")
    if "delete_records" not in state.read(requests, request_id).steps_done:
        raise ExerciseFailed("the holder's write returned True but delete_records is not in steps_done")
    successor = state.claim(requests, request_id, "worker-b", LEASE, now=now + LEASE + 1).claim
    zombie_answer = _write(candidate, requests, request_id, holder.fencing_token, "delete_files", "the zombie's write")
    stored = state.read(requests, request_id)
    if "delete_files" in stored.steps_done:
        raise ExerciseFailed(
            f"worker-a's lease expired and worker-b claimed the request with token {successor.fencing_token}, "
            f"yet worker-a's write with token {holder.fencing_token} landed: the write must carry a condition on the token"
        )
    if zombie_answer is not False:
        raise ExerciseFailed(f"the zombie's write was refused but returned {zombie_answer!r}; return False when fenced out")
    answer = _write(candidate, requests, request_id, successor.fencing_token, "delete_files", "the new holder's write")
    if answer is not True:
        raise ExerciseFailed("the new holder (the higher token) was refused; compare with the token stored on the item")
    _after_the_end(candidate, requests, now)
    _unknown_request(candidate, requests)
    for round_number in range(1, RACE_ROUNDS + 1):
        _race_zombie_and_holder(candidate, table_name, now, round_number)
    return (
        "the holder's writes land, a zombie's write after a newer claim is refused (also when both "
        f"write at once, {RACE_ROUNDS} rounds), and nothing is written to a finished or unknown request"
    )


def _after_the_end(candidate: Callable, requests: Any, now: float) -> None:
    request_id = _new_request(requests)
    claim = state.claim(requests, request_id, "worker-a", LEASE, now=now).claim
    state.release_after_failure(requests, claim, "gave up", max_attempts=1, retry_delay_seconds=0, now=now)
    what = "a write after the request FAILED"
    answer = _write(candidate, requests, request_id, claim.fencing_token, "send_goodbye", what)
    if answer is not False or "send_goodbye" in state.read(requests, request_id).steps_done:
        raise ExerciseFailed(
            "the request is FAILED (its token is still the latest), yet the write landed: the condition must "
            "also require status = PROCESSING"
        )


def _unknown_request(candidate: Callable, requests: Any) -> None:
    missing = f"del-missing-{uuid.uuid4().hex[:8]}"
    answer = _write(candidate, requests, missing, 1, "delete_records", "a write to an unknown request")
    if "Item" in requests.get_item(Key={"deletion_request_id": missing}, ConsistentRead=True):
        raise ExerciseFailed("a write to a request that does not exist created it; the condition must refuse it")
    if answer is not False:
        raise ExerciseFailed(f"a write to an unknown request returned {answer!r}; it should return False")


def _race_zombie_and_holder(candidate: Callable, table_name: str, now: float, round_number: int) -> None:
    setup = table(table_name)
    request_id = _new_request(setup)
    zombie = state.claim(setup, request_id, "zombie", LEASE, now=now).claim
    holder = state.claim(setup, request_id, "holder", LEASE, now=now + LEASE + 1).claim
    # A Table per thread; an exception is the learner's outcome, reported below.
    writes = [(zombie, "delete_identity"), (holder, "delete_records")]
    calls = [lambda t=table(table_name), c=c, s=s: candidate(t, request_id, c.fencing_token, s) for c, s in writes]
    answers = all_at_once(calls, join_seconds=30, capture_errors=True)
    steps = state.read(setup, request_id).steps_done
    if "delete_identity" in steps:
        raise ExerciseFailed(f"round {round_number}: the zombie's write landed while the holder wrote at the same moment")
    if "delete_records" not in steps:
        raise ExerciseFailed(f"round {round_number}: the holder's write was lost: {answers[1]!r}")


# -- exercise 2: the goodbye email, once -----------------------------------------------

GOODBYE_HINT = """\
Sending has no natural "already done" you could look up afterwards, so give the email a
key that is the same on every attempt for this request, for example
    f"goodbye#{deletion_request_id}"
and put it with ConditionExpression="attribute_not_exists(idempotency_key)". The first
attempt creates the item (return True); a repeat fails the condition
(ConditionalCheckFailedException), which means "already sent": return False. A fresh
uuid4() per attempt can never recognise a repeat."""


def naive_send_goodbye(outbox: Any, deletion_request_id: str, user_id: str) -> bool:
    """The starting point: a fresh key per attempt, so every retry sends another email."""
    outbox.put_item(
        Item={
            "idempotency_key": uuid.uuid4().hex,
            "kind": "goodbye",
            "deletion_request_id": deletion_request_id,
            "user_id": user_id,
        }
    )
    return True


def send_goodbye(outbox: Any, deletion_request_id: str, user_id: str) -> bool:
    try:
        outbox.put_item(
            Item={
                # The same key on every attempt for this request: the repeat is recognised.
                "idempotency_key": f"goodbye#{deletion_request_id}",
                "kind": "goodbye",
                "deletion_request_id": deletion_request_id,
                "user_id": user_id,
            },
            ConditionExpression="attribute_not_exists(idempotency_key)",
        )
        return True
    except outbox.meta.client.exceptions.ConditionalCheckFailedException:
        return False  # sent by an earlier attempt


def goodbye_exercise(stack: dict) -> Exercise:
    title = "Send the goodbye email once per request"
    return Exercise(title, GOODBYE_HINT, send_goodbye, verify_goodbye, stack["tables"]["email_outbox"])


def verify_goodbye(candidate: Callable[[Any, str, str], bool], table_name: str) -> str:
    outbox = table(table_name)
    request_id, user_id = f"del-ex-{uuid.uuid4().hex[:10]}", f"user-ex-{uuid.uuid4().hex[:6]}"
    first = attempt(candidate, outbox, request_id, user_id, what="the first attempt", advice=ALREADY_SENT)
    retry = attempt(candidate, outbox, request_id, user_id, what="the retry", advice=ALREADY_SENT)
    sent = deletion.outbox_items(outbox, deletion_request_id=request_id)
    if len(sent) != 1:
        raise ExerciseFailed(f"a first attempt and a retry sent {len(sent)} emails for one request; the key must be the same on both")
    if sent[0].get("user_id") != user_id or sent[0].get("kind") != "goodbye":
        raise ExerciseFailed(f"the email should carry kind='goodbye' and the user_id; stored: {sent[0]!r}")
    if (first, retry) != (True, False):
        raise ExerciseFailed(f"the first attempt should return True and the retry False, got {first!r} and {retry!r}")
    other = f"del-ex-{uuid.uuid4().hex[:10]}"
    attempt(candidate, outbox, other, user_id, what="a second request", advice=ALREADY_SENT)
    if len(deletion.outbox_items(outbox, deletion_request_id=other)) != 1:
        raise ExerciseFailed("a different deletion request must get its own email; the key must include the request id")
    _race_goodbyes(candidate, table_name, user_id)
    return f"a retry sends nothing, another request gets its own email, and {GOODBYE_RACERS} attempts at once sent exactly one"


def _race_goodbyes(candidate: Callable, table_name: str, user_id: str) -> None:
    request_id = f"del-ex-{uuid.uuid4().hex[:10]}"
    tables = [table(table_name) for _ in range(GOODBYE_RACERS)]
    # An exception is the learner's outcome, reported below.
    calls = [lambda t=t: candidate(t, request_id, user_id) for t in tables]
    answers = all_at_once(calls, join_seconds=30, capture_errors=True)
    sent = deletion.outbox_items(tables[0], deletion_request_id=request_id)
    if len(sent) != 1:
        raise ExerciseFailed(f"{GOODBYE_RACERS} attempts at once sent {len(sent)} emails; the condition must be part of the put")
    errors = [a for a in answers if isinstance(a, Exception)]
    if errors:
        raise ExerciseFailed(f"{len(errors)} simultaneous attempts raised {type(errors[0]).__name__}: {errors[0]}")
    if answers.count(True) != 1:
        raise ExerciseFailed(f"exactly one of {GOODBYE_RACERS} attempts should report sending; {answers.count(True)} did")


def _write(candidate: Callable, requests: Any, request_id: str, token: int, step: str, what: str) -> Any:
    return attempt(candidate, requests, request_id, token, step, what=what, advice=FENCED_OUT)


def _new_request(requests: Any) -> str:
    request_id = f"del-ex-{uuid.uuid4().hex[:10]}"
    state.create(requests, request_id, f"user-ex-{uuid.uuid4().hex[:6]}", int(time.time()))
    return request_id

