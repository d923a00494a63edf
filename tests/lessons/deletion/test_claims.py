"""Claims, leases and fencing tokens of deletion requests, against a real DynamoDB API."""

from __future__ import annotations

import uuid

import boto3
import pytest

from idemlab.lessons import deletion
from support.deletion_scenario import copy_tables

state = deletion.import_function_module("erasure.state")
claims = deletion.import_function_module("erasure.claims")
sweeps = deletion.import_function_module("erasure.sweeps")
errors = deletion.import_function_module("erasure.errors")
Status, ClaimOutcome = state.Status, claims.ClaimOutcome

LEASE = 60  # seconds; every test moves its own clock, so the length only sets the scale
T0 = 1_800_000_000  # a fixed "now" (2027); tests never read the wall clock


@pytest.fixture(scope="module")
def table(backend, stack):
    names = copy_tables(stack)
    return boto3.resource("dynamodb", endpoint_url=backend, region_name="us-east-1").Table(names["deletion_requests"])


def new_request(table, due_at=T0) -> str:
    request_id = f"del-{uuid.uuid4().hex[:12]}"
    state.create(table, request_id, f"user-{uuid.uuid4().hex[:6]}", due_at, now=T0 - 10)
    return request_id


def owner_of(table, request_id) -> str:
    """The user a request deletes: the only one who may cancel it."""
    return state.read(table, request_id).user_id


def claimed(table, request_id, owner, now=T0):
    result = claims.claim(table, request_id, owner, LEASE, now=now)
    assert result.outcome is ClaimOutcome.CLAIMED, result
    return result.claim


def finish_steps(table, claim, now=T0):
    for step in state.STEPS:
        claims.record_step(table, claim, step, LEASE, now=now)


def test_creating_the_same_request_twice_returns_the_stored_one(table):
    request_id = f"del-{uuid.uuid4().hex[:12]}"
    first, created = state.create(table, request_id, "user-a", T0, now=T0 - 5)
    second, created_again = state.create(table, request_id, "user-b", T0 + 99, now=T0)
    assert (created, created_again) == (True, False)
    assert second == first
    assert second.user_id == "user-a"


def test_first_claim_wins_with_token_one_and_a_lease(table):
    request_id = new_request(table)
    claim = claimed(table, request_id, "worker-a")
    assert claim.fencing_token == 1
    assert claim.attempts == 1
    assert claim.lease_expires_at == T0 + LEASE
    assert state.read(table, request_id).status is Status.PROCESSING


def test_second_claim_during_a_live_lease_is_told_in_progress(table):
    request_id = new_request(table)
    claimed(table, request_id, "worker-a")
    result = claims.claim(table, request_id, "worker-b", LEASE, now=T0 + LEASE - 1)
    assert result.outcome is ClaimOutcome.IN_PROGRESS
    assert result.claim is None
    assert state.read(table, request_id).lease_owner == "worker-a"


def test_claim_after_the_lease_expired_gets_the_next_token(table):
    request_id = new_request(table)
    first = claimed(table, request_id, "worker-a")
    second = claimed(table, request_id, "worker-b", now=T0 + LEASE + 1)
    assert second.fencing_token == first.fencing_token + 1
    assert state.read(table, request_id).lease_owner == "worker-b"


def test_zombie_progress_write_after_a_newer_claim_is_refused(table):
    request_id = new_request(table)
    zombie = claimed(table, request_id, "worker-a")
    successor = claimed(table, request_id, "worker-b", now=T0 + LEASE + 1)
    with pytest.raises(errors.ClaimLostError):
        claims.record_step(table, zombie, "delete_records", LEASE, now=T0 + LEASE + 2)
    claims.record_step(table, successor, "delete_records", LEASE, now=T0 + LEASE + 2)
    assert state.read(table, request_id).steps_done == {"delete_records"}


def test_zombie_cannot_complete_or_release(table):
    request_id = new_request(table)
    zombie = claimed(table, request_id, "worker-a")
    finish_steps(table, zombie)
    successor = claimed(table, request_id, "worker-b", now=T0 + LEASE + 1)
    with pytest.raises(errors.ClaimLostError):
        claims.complete(table, zombie, now=T0 + LEASE + 2)
    with pytest.raises(errors.ClaimLostError):
        claims.release_after_failure(table, zombie, "boom", max_attempts=3, retry_delay_seconds=0, now=T0 + LEASE + 2)
    current = state.read(table, request_id)
    assert (current.status, current.fencing_token) == (Status.PROCESSING, successor.fencing_token)


def test_same_owner_claiming_again_takes_over_its_own_claim(table):
    request_id = new_request(table)
    first = claimed(table, request_id, "execution-1")
    again = claimed(table, request_id, "execution-1", now=T0 + 1)
    assert again.fencing_token == first.fencing_token + 1
    with pytest.raises(errors.ClaimLostError):
        claims.record_step(table, first, "delete_files", LEASE, now=T0 + 2)


def test_progress_write_renews_the_lease(table):
    request_id = new_request(table)
    claim = claimed(table, request_id, "worker-a")
    claims.record_step(table, claim, "delete_records", LEASE, now=T0 + 50)
    assert state.read(table, request_id).lease_expires_at == T0 + 50 + LEASE
    result = claims.claim(table, request_id, "worker-b", LEASE, now=T0 + LEASE + 1)
    assert result.outcome is ClaimOutcome.IN_PROGRESS


@pytest.mark.parametrize(
    "finish, outcome",
    [
        ("complete", ClaimOutcome.ALREADY_DONE),
        ("cancel", ClaimOutcome.CANCELLED),
        ("fail", ClaimOutcome.FAILED),
    ],
)
def test_a_loser_is_told_what_the_current_status_means(table, finish, outcome):
    request_id = new_request(table)
    if finish == "cancel":
        assert state.cancel(table, request_id, owner_of(table, request_id), now=T0)[0]
    else:
        claim = claimed(table, request_id, "worker-a")
        if finish == "complete":
            finish_steps(table, claim)
            claims.complete(table, claim, now=T0)
        else:
            assert (
                claims.release_after_failure(table, claim, "boom", max_attempts=1, retry_delay_seconds=0, now=T0)
                is Status.FAILED
            )
    before = state.read(table, request_id)
    result = claims.claim(table, request_id, "worker-b", LEASE, now=T0 + 10 * LEASE)
    assert result.outcome is outcome
    assert state.read(table, request_id) == before


def test_claiming_an_unknown_request_raises_and_creates_nothing(table):
    with pytest.raises(errors.UnknownDeletionRequestError):
        claims.claim(table, "del-does-not-exist", "worker-a", LEASE, now=T0)
    assert "Item" not in table.get_item(Key={"deletion_request_id": "del-does-not-exist"})


def test_completion_requires_every_step(table):
    request_id = new_request(table)
    claim = claimed(table, request_id, "worker-a")
    claims.record_step(table, claim, "delete_records", LEASE, now=T0)
    with pytest.raises(errors.StepsNotFinishedError, match="delete_files, delete_identity, send_goodbye"):
        claims.complete(table, claim, now=T0)
    assert state.read(table, request_id).status is Status.PROCESSING


def test_unknown_step_name_raises_loudly(table):
    claim = claimed(table, new_request(table), "worker-a")
    with pytest.raises(errors.UnknownRecoveryPointError):
        claims.record_step(table, claim, "delete_everything", LEASE, now=T0)


def test_failures_leave_retryable_until_attempts_run_out(table):
    request_id = new_request(table)
    statuses = []
    for attempt in range(3):
        now = T0 + attempt * 10
        claim = claimed(table, request_id, f"worker-{attempt}", now=now)
        statuses.append(
            claims.release_after_failure(table, claim, "boom", max_attempts=3, retry_delay_seconds=5, now=now)
        )
    assert statuses == [Status.RETRYABLE, Status.RETRYABLE, Status.FAILED]
    failed = state.read(table, request_id)
    assert (failed.status, failed.attempts, failed.lease_expires_at) == (Status.FAILED, 3, None)


def test_only_a_redrive_claims_a_failed_request_with_a_fresh_budget(table):
    request_id = new_request(table)
    claim = claimed(table, request_id, "worker-a")
    claims.release_after_failure(table, claim, "boom", max_attempts=1, retry_delay_seconds=0, now=T0)
    redriven = claims.claim(table, request_id, "redrive-1", LEASE, now=T0 + 1, redrive=True)
    assert redriven.outcome is ClaimOutcome.CLAIMED
    assert (redriven.claim.attempts, redriven.claim.fencing_token) == (1, 2)


def test_redrive_leaves_a_request_that_is_not_failed_alone(table):
    request_id = new_request(table)
    result = claims.claim(table, request_id, "redrive-1", LEASE, now=T0, redrive=True)
    assert result.outcome is ClaimOutcome.IN_PROGRESS
    assert state.read(table, request_id).status is Status.SCHEDULED


def test_cancel_wins_only_while_scheduled(table):
    request_id = new_request(table)
    claimed(table, request_id, "worker-a")
    won, current = state.cancel(table, request_id, owner_of(table, request_id), now=T0 + 1)
    assert not won
    assert current.status is Status.PROCESSING
    fresh = new_request(table)
    won, current = state.cancel(table, fresh, owner_of(table, fresh), now=T0)
    assert won and current.status is Status.CANCELLED
    assert claims.claim(table, fresh, "worker-a", LEASE, now=T0 + 1).outcome is ClaimOutcome.CANCELLED


# Claimed two leases before T0, so its lease has expired by T0: due by then, since a
# request is claimed only once it is due (the grace period).
LONG_AGO = T0 - 2 * LEASE


def test_sweep_finds_expired_leases_on_the_index_and_moves_them_to_retryable(table):
    expired = new_request(table, due_at=LONG_AGO)
    live = new_request(table)
    claimed(table, expired, "worker-a", now=LONG_AGO)
    claimed(table, live, "worker-b", now=T0)
    found = {r.deletion_request_id for r in sweeps.expired_leases(table, now=T0)}
    assert expired in found and live not in found
    seen = next(r for r in sweeps.expired_leases(table, now=T0) if r.deletion_request_id == expired)
    assert sweeps.sweep(table, seen, max_attempts=3, retry_delay_seconds=0, now=T0) is Status.RETRYABLE
    assert state.read(table, expired).status is Status.RETRYABLE
    assert expired in {r.deletion_request_id for r in sweeps.due_retries(table, now=T0)}
    assert state.read(table, live).status is Status.PROCESSING


def test_sweep_leaves_alone_a_claim_made_after_its_query(table):
    request_id = new_request(table, due_at=LONG_AGO)
    claimed(table, request_id, "worker-a", now=LONG_AGO)
    seen = next(r for r in sweeps.expired_leases(table, now=T0) if r.deletion_request_id == request_id)
    fresh = claimed(table, request_id, "worker-b", now=T0)
    assert sweeps.sweep(table, seen, max_attempts=3, now=T0 + 1) is None
    current = state.read(table, request_id)
    assert (current.status, current.fencing_token, current.lease_owner) == (
        Status.PROCESSING,
        fresh.fencing_token,
        "worker-b",
    )


def test_sweep_fails_a_request_out_of_attempts(table):
    request_id = new_request(table, due_at=LONG_AGO)
    claimed(table, request_id, "worker-a", now=LONG_AGO)
    seen = next(r for r in sweeps.expired_leases(table, now=T0) if r.deletion_request_id == request_id)
    assert sweeps.sweep(table, seen, max_attempts=1, now=T0) is Status.FAILED


def test_zombie_write_after_a_sweep_is_refused(table):
    request_id = new_request(table, due_at=LONG_AGO)
    zombie = claimed(table, request_id, "worker-a", now=LONG_AGO)
    seen = next(r for r in sweeps.expired_leases(table, now=T0) if r.deletion_request_id == request_id)
    sweeps.sweep(table, seen, max_attempts=3, now=T0)
    with pytest.raises(errors.ClaimLostError):
        claims.record_step(table, zombie, "delete_records", LEASE, now=T0 + 1)
    assert state.read(table, request_id).steps_done == frozenset()


def test_a_corrupt_status_raises_instead_of_being_guessed(table):
    request_id = new_request(table)
    table.update_item(
        Key={"deletion_request_id": request_id},
        UpdateExpression="SET #s = :bad",
        ExpressionAttributeNames={"#s": "status"},
        ExpressionAttributeValues={":bad": "HALF_DONE"},
    )
    with pytest.raises(errors.UnknownRecoveryPointError):
        state.read(table, request_id)


def test_a_redrive_retrying_its_own_claim_takes_it_over_again(table):
    request_id = new_request(table)
    claim = claimed(table, request_id, "worker-a")
    claims.release_after_failure(table, claim, "boom", max_attempts=1, retry_delay_seconds=0, now=T0)
    first = claims.claim(table, request_id, "redrive-1", LEASE, now=T0 + 1, redrive=True)
    again = claims.claim(table, request_id, "redrive-1", LEASE, now=T0 + 2, redrive=True)
    assert (first.outcome, again.outcome) == (ClaimOutcome.CLAIMED, ClaimOutcome.CLAIMED)
    assert again.claim.fencing_token == first.claim.fencing_token + 1
    other = claims.claim(table, request_id, "redrive-2", LEASE, now=T0 + 3, redrive=True)
    assert other.outcome is ClaimOutcome.IN_PROGRESS


def test_completing_twice_under_the_same_claim_is_a_no_op_but_a_zombie_still_loses(table):
    request_id = new_request(table)
    zombie = claimed(table, request_id, "worker-a")
    holder = claimed(table, request_id, "worker-b", now=T0 + LEASE + 1)
    finish_steps(table, holder, now=T0 + LEASE + 2)
    claims.complete(table, holder, now=T0 + LEASE + 3)
    claims.complete(table, holder, now=T0 + LEASE + 4)
    with pytest.raises(errors.ClaimLostError):
        claims.complete(table, zombie, now=T0 + LEASE + 5)
    assert state.read(table, request_id).status is Status.COMPLETED


def test_a_claim_before_the_due_time_is_refused_and_changes_nothing(table):
    """The grace period holds whoever starts the workflow (issue 24, item 1)."""
    request_id = new_request(table, due_at=T0 + 3600)
    before = table.get_item(Key={"deletion_request_id": request_id}, ConsistentRead=True)["Item"]
    early = claims.claim(table, request_id, "forged-start", LEASE, now=T0)
    assert (early.outcome, early.claim) == (ClaimOutcome.NOT_DUE, None)
    assert table.get_item(Key={"deletion_request_id": request_id}, ConsistentRead=True)["Item"] == before
    # A cancel within the grace period still wins, and once due the claim is allowed.
    assert claimed(table, request_id, "the schedule", now=T0 + 3600).fencing_token == 1


def test_a_cancel_for_another_user_is_refused_and_changes_nothing(table):
    """Issue 24, item 2: the request id is derived from the user id, so knowing it
    authorises nothing; the cancel must name the user the request deletes."""
    request_id = new_request(table)
    before = table.get_item(Key={"deletion_request_id": request_id}, ConsistentRead=True)["Item"]
    with pytest.raises(errors.NotYourRequestError, match="nothing was cancelled"):
        state.cancel(table, request_id, "mallory", now=T0)
    assert table.get_item(Key={"deletion_request_id": request_id}, ConsistentRead=True)["Item"] == before
    assert state.cancel(table, request_id, owner_of(table, request_id), now=T0)[0] is True
