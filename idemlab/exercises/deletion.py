"""Lessons 3 and 4 exercises, on the deployed tables: the fenced progress write (notebook 03,
``fenced_write_exercise(stack).check(record_step)``, ``deletion_requests``) and the goodbye
email sent once (notebook 04, ``goodbye_exercise(stack).check(send_goodbye)``, ``email_outbox``).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

from idemlab.barrier import settled
from idemlab.exercises import RACERS, Exercise, attempt, expect, race, table
from idemlab.lessons import deletion

state = deletion.import_function_module("erasure.state")
claims = deletion.import_function_module("erasure.claims")

LEASE = 30  # the exercise moves its own clock, so the length only sets the scale
# Rounds of a zombie and the holder writing at the same moment: a write whose condition
# is checked outside DynamoDB lets the zombie through in most rounds, so a lucky pass of
# all of them is very unlikely.
RACE_ROUNDS = 5
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


def verify_fenced_write(candidate: Callable[[Any, str, int, str], bool], stack: dict) -> str:
    requests = table(stack, "deletion_requests")
    now = time.time()

    def write(request_id: str, token: int, step: str, what: str) -> tuple[Any, bool]:
        """The learner's write of ``step`` with ``token``, and whether ``step`` is recorded afterwards."""
        answer = attempt(candidate, requests, request_id, token, step, what=what, advice=FENCED_OUT)
        item = requests.get_item(Key={"deletion_request_id": request_id}, ConsistentRead=True).get("Item", {})
        return answer, step in item.get("steps_done", ())

    request_id = deletion.new_request_item(stack)
    holder = claims.claim(requests, request_id, "worker-a", LEASE, now=now).claim
    answer, landed = write(request_id, holder.fencing_token, "delete_records", "the holder's write")
    expect(answer is True, "the holder of the claim wrote progress and got something other than True")
    expect(landed, "the holder's write returned True but delete_records is not in steps_done")
    successor = claims.claim(requests, request_id, "worker-b", LEASE, now=now + LEASE + 1).claim
    answer, landed = write(request_id, holder.fencing_token, "delete_files", "the zombie's write")
    expect(
        not landed,
        f"worker-a's lease expired and worker-b claimed the request with token "
        f"{successor.fencing_token}, yet worker-a's write with token {holder.fencing_token} landed: "
        "the write must carry a condition on the token",
    )
    expect(answer is False, f"the zombie's write was refused but returned {answer!r}; return False when fenced out")
    answer, _ = write(request_id, successor.fencing_token, "delete_files", "the new holder's write")
    expect(answer is True, "the new holder (the higher token) was refused; compare with the token stored on the item")

    request_id = deletion.new_request_item(stack)
    claim = claims.claim(requests, request_id, "worker-a", LEASE, now=now).claim
    claims.release_after_failure(requests, claim, "gave up", max_attempts=1, retry_delay_seconds=0, now=now)
    answer, landed = write(request_id, claim.fencing_token, "send_goodbye", "a write after the request FAILED")
    expect(
        answer is False and not landed,
        "the request is FAILED (its token is still the latest), yet the write "
        "landed: the condition must also require status = PROCESSING",
    )

    answer, landed = write(f"del-missing-{uuid.uuid4().hex[:8]}", 1, "delete_records", "a write to an unknown request")
    expect(not landed, "a write to a request that does not exist created it; the condition must refuse it")
    expect(answer is False, f"a write to an unknown request returned {answer!r}; it should return False")

    for round_number in range(1, RACE_ROUNDS + 1):
        request_id = deletion.new_request_item(stack)
        zombie = claims.claim(requests, request_id, "zombie", LEASE, now=now).claim
        holder = claims.claim(requests, request_id, "holder", LEASE, now=now + LEASE + 1).claim
        # A Table per thread; an exception is the learner's outcome, reported below.
        writes = [
            (table(stack, "deletion_requests"), request_id, claim.fencing_token, step)
            for claim, step in ((zombie, "delete_identity"), (holder, "delete_records"))
        ]
        answers = settled([lambda w=w: candidate(*w) for w in writes])
        steps = state.read(requests, request_id).steps_done
        expect(
            "delete_identity" not in steps,
            f"round {round_number}: the zombie's write landed while the holder wrote at the same moment",
        )
        expect("delete_records" in steps, f"round {round_number}: the holder's write was lost: {answers[1]!r}")
    return (
        f"the holder's writes land, a zombie's write after a newer claim is refused (also when both write at "
        f"once, {RACE_ROUNDS} rounds), and nothing is written to a finished or unknown request"
    )


fenced_write_exercise = Exercise(
    "Record progress only while holding the claim", FENCED_HINT, record_step, verify_fenced_write
)

# -- exercise 2: the goodbye email, once -----------------------------------------------

GOODBYE_HINT = """\
Sending has no natural "already done" you could look up afterwards, so give the email a
key that is the same on every attempt for this request, for example
    f"goodbye#{deletion_request_id}"
and put it with ConditionExpression="attribute_not_exists(idempotency_key)". The first
attempt creates the item (return True); a repeat fails the condition
(ConditionalCheckFailedException), which means "already sent": return False. A fresh
uuid4() per attempt can never recognise a repeat."""


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


def verify_goodbye(candidate: Callable[[Any, str, str], bool], stack: dict) -> str:
    outbox = table(stack, "email_outbox")
    user_id = f"user-ex-{uuid.uuid4().hex[:6]}"
    request_id, other, raced = (f"del-ex-{uuid.uuid4().hex[:10]}" for _ in range(3))
    first, retry = (
        attempt(candidate, outbox, request_id, user_id, what=what, advice=ALREADY_SENT)
        for what in ("the first attempt", "the retry")
    )
    sent = deletion.outbox_items(outbox, deletion_request_id=request_id)
    expect(
        len(sent) == 1,
        f"a first attempt and a retry sent {len(sent)} emails for one request; the key must be the same on both",
    )
    expect(
        sent[0].get("user_id") == user_id and sent[0].get("kind") == "goodbye",
        f"the email should carry kind='goodbye' and the user_id; stored: {sent[0]!r}",
    )
    expect(
        (first, retry) == (True, False),
        f"the first attempt should return True and the retry False, got {first!r} and {retry!r}",
    )
    attempt(candidate, outbox, other, user_id, what="a second request", advice=ALREADY_SENT)
    expect(
        len(deletion.outbox_items(outbox, deletion_request_id=other)) == 1,
        "a different deletion request must get its own email; the key must include the request id",
    )
    racers = [(table(stack, "email_outbox"), raced, user_id) for _ in range(RACERS)]  # a Table per thread
    answers = race(candidate, racers, "the race")
    sent = deletion.outbox_items(outbox, deletion_request_id=raced)
    expect(len(sent) == 1, f"{RACERS} attempts at once sent {len(sent)} emails; the condition must be part of the put")
    sending = answers.count(True)
    expect(sending == 1, f"exactly one of {RACERS} attempts should report sending; {sending} did")
    return f"a retry sends nothing, another request gets its own email, and {RACERS} attempts at once sent exactly one"


goodbye_exercise = Exercise("Send the goodbye email once per request", GOODBYE_HINT, send_goodbye, verify_goodbye)
