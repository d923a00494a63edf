"""Property: whatever the interleaving of claims, lease expiry, zombie writes, sweeps,
completions and failures, DynamoDB accepts no write from a superseded claim.

Hypothesis drives several workers against one deletion request on a real DynamoDB API;
a small model says which claim is current, and every answer of the table is checked
against it.
"""

from __future__ import annotations

import uuid

import boto3
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test

from idemlab.lessons import deletion

state = deletion.import_function_module("deletion_state")
errors = deletion.import_function_module("deletion_errors")
Status, ClaimOutcome = state.Status, state.ClaimOutcome

LEASE = 30
MAX_ATTEMPTS = 4  # low enough that runs reach FAILED
T0 = 1_800_000_000
WORKERS = ("w1", "w2", "w3")


@pytest.fixture(scope="module")
def table(backend):
    names = deletion.create_tables(boto3.client("dynamodb", endpoint_url=backend, region_name="us-east-1"))
    return boto3.resource("dynamodb", endpoint_url=backend, region_name="us-east-1").Table(names["deletion_requests"])


class Tally:
    def __init__(self):
        self.stale_refused = 0
        self.stale_accepted = 0
        self.current_accepted = 0
        self.completed = 0


class DeletionInterleavings(RuleBasedStateMachine):
    table = None
    tally: Tally = None

    def __init__(self):
        super().__init__()
        self.now = T0
        self.request_id = f"del-{uuid.uuid4().hex[:12]}"
        state.create(self.table, self.request_id, "user-prop", T0, now=T0)
        # The model: what the table should hold.
        self.status = Status.SCHEDULED
        self.token = 0
        self.attempts = 0
        self.owner = None
        self.lease_until = None
        self.steps = set()
        self.held = {}  # worker -> the last Claim it won, current or not

    def _is_current(self, claim) -> bool:
        return self.status is Status.PROCESSING and claim.fencing_token == self.token

    @rule(worker=st.sampled_from(WORKERS))
    def claim(self, worker):
        claimable = self.status in (Status.SCHEDULED, Status.RETRYABLE) or (
            self.status is Status.PROCESSING and (self.lease_until < self.now or self.owner == worker)
        )
        result = state.claim(self.table, self.request_id, worker, LEASE, now=self.now)
        if not claimable:
            assert result.outcome is not ClaimOutcome.CLAIMED
            return
        assert result.outcome is ClaimOutcome.CLAIMED
        self.token += 1
        self.attempts += 1
        assert result.claim.fencing_token == self.token
        self.status, self.owner, self.lease_until = Status.PROCESSING, worker, self.now + LEASE
        self.held[worker] = result.claim

    @rule(seconds=st.integers(min_value=0, max_value=2 * LEASE))
    def time_passes(self, seconds):
        self.now += seconds

    @rule(worker=st.sampled_from(WORKERS), step=st.sampled_from(state.STEPS))
    def progress_write(self, worker, step):
        claim = self.held.get(worker)
        if claim is None:
            return
        current = self._is_current(claim)
        try:
            state.record_step(self.table, claim, step, LEASE, now=self.now)
            accepted = True
        except errors.ClaimLost:
            accepted = False
        if current:
            assert accepted, "the current holder's write was refused"
            self.tally.current_accepted += 1
            self.steps.add(step)
            self.lease_until = self.now + LEASE
        elif accepted:
            self.tally.stale_accepted += 1
        else:
            self.tally.stale_refused += 1

    @rule(worker=st.sampled_from(WORKERS))
    def every_step(self, worker):
        """A worker runs through all its steps at once, so runs reach completion often."""
        for step in state.STEPS:
            self.progress_write(worker, step)

    @rule(worker=st.sampled_from(WORKERS))
    def complete(self, worker):
        claim = self.held.get(worker)
        if claim is None:
            return
        current = self._is_current(claim)
        try:
            state.complete(self.table, claim, now=self.now)
            outcome = "completed"
        except errors.StepsNotFinished:
            outcome = "unfinished"
        except errors.ClaimLost:
            outcome = "lost"
        if self.status is Status.COMPLETED and claim.fencing_token == self.token:
            assert outcome == "completed"  # the completing claim again: a no-op
        elif not current:
            assert outcome == "lost"
            self.tally.stale_refused += 1
        elif self.steps >= set(state.STEPS):
            assert outcome == "completed"
            self.tally.completed += 1
            self.status, self.owner, self.lease_until = Status.COMPLETED, None, None
        else:
            assert outcome == "unfinished"

    @rule(worker=st.sampled_from(WORKERS))
    def fail(self, worker):
        claim = self.held.get(worker)
        if claim is None:
            return
        current = self._is_current(claim)
        try:
            released = state.release_after_failure(self.table, claim, "injected", MAX_ATTEMPTS, 0, now=self.now)
        except errors.ClaimLost:
            released = None
        if not current:
            assert released is None
            self.tally.stale_refused += 1
            return
        expected = Status.FAILED if claim.attempts >= MAX_ATTEMPTS else Status.RETRYABLE
        assert released is expected
        self.status, self.owner = expected, None
        self.lease_until = self.now if expected is Status.RETRYABLE else None

    @rule()
    def sweep(self):
        for seen in state.expired_leases(self.table, now=self.now):
            if seen.deletion_request_id != self.request_id:
                continue
            moved = state.sweep(self.table, seen, MAX_ATTEMPTS, 0, now=self.now)
            assert self.status is Status.PROCESSING and self.lease_until < self.now
            expected = Status.FAILED if self.attempts >= MAX_ATTEMPTS else Status.RETRYABLE
            assert moved is expected
            self.status, self.owner = expected, None
            self.lease_until = self.now if expected is Status.RETRYABLE else None

    @invariant()
    def table_agrees_with_the_model(self):
        stored = state.read(self.table, self.request_id)
        assert stored.status is self.status
        assert stored.fencing_token == self.token
        assert stored.steps_done == self.steps
        assert stored.lease_expires_at == self.lease_until

    @invariant()
    def no_stale_write_was_ever_accepted(self):
        assert self.tally.stale_accepted == 0


@pytest.mark.timeout(240)
def test_no_interleaving_lets_a_superseded_claim_write(table):
    DeletionInterleavings.table = table
    DeletionInterleavings.tally = tally = Tally()
    run_state_machine_as_test(
        DeletionInterleavings,
        settings=settings(
            max_examples=20,
            stateful_step_count=25,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow],
            database=None,
        ),
    )
    assert tally.stale_accepted == 0
    # The property means something only if zombies did try, and holders did progress.
    assert tally.stale_refused > 0
    assert tally.current_accepted > 0
    assert tally.completed > 0
