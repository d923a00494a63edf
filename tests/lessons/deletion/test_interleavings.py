"""Property: whatever the interleaving of claims, lease expiry, zombie writes, sweeps
(some failing midway), restarts (some dying before they claim), completions and
failures, DynamoDB accepts no write from a superseded claim, and no request is left
behind: from any state, the sweeper and fresh workers bring it to COMPLETED or FAILED.

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
from support.deletion_scenario import copy_tables

state = deletion.import_function_module("erasure.state")
claims = deletion.import_function_module("erasure.claims")
sweeps = deletion.import_function_module("erasure.sweeps")
errors = deletion.import_function_module("erasure.errors")
Status, ClaimOutcome = state.Status, claims.ClaimOutcome

LEASE = 30
MAX_ATTEMPTS = 4  # low enough that runs reach FAILED
T0 = 1_800_000_000
WORKERS = ("w1", "w2", "w3")


@pytest.fixture(scope="module")
def table(backend, stack):
    names = copy_tables(stack)
    return boto3.resource("dynamodb", endpoint_url=backend, region_name="us-east-1").Table(names["deletion_requests"])


class Tally:
    def __init__(self):
        self.stale_refused = 0
        self.stale_accepted = 0
        self.current_accepted = 0
        self.completed = 0
        self.sweeps_failed_midway = 0
        self.restarts_died = 0
        self.drained = {"COMPLETED": 0, "FAILED": 0}


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
        self.lease_until = T0  # a SCHEDULED request's due time
        self.restarts = 0
        self.unclaimed_restarts = 0
        self.steps = set()
        self.held = {}  # worker -> the last Claim it won, current or not

    def _is_current(self, claim) -> bool:
        return self.status is Status.PROCESSING and claim.fencing_token == self.token

    @rule(worker=st.sampled_from(WORKERS))
    def claim(self, worker):
        expired = self.status is Status.PROCESSING and self.lease_until < self.now
        fresh = self.status in (Status.SCHEDULED, Status.RETRYABLE) or expired
        again = self.status is Status.PROCESSING and not expired and self.owner == worker
        result = claims.claim(self.table, self.request_id, worker, LEASE, now=self.now)
        if not (fresh or again):
            assert result.outcome is not ClaimOutcome.CLAIMED
            return
        assert result.outcome is ClaimOutcome.CLAIMED
        self.token += 1
        if fresh:  # the same execution claiming again is not a new attempt
            self.attempts += 1
        assert result.claim.fencing_token == self.token
        assert result.claim.attempts == self.attempts
        self.status, self.owner, self.lease_until = Status.PROCESSING, worker, self.now + LEASE
        self.unclaimed_restarts = 0
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
            claims.record_step(self.table, claim, step, LEASE, now=self.now)
            accepted = True
        except errors.ClaimLostError:
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
            claims.complete(self.table, claim, now=self.now)
            outcome = "completed"
        except errors.StepsNotFinishedError:
            outcome = "unfinished"
        except errors.ClaimLostError:
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
            released = claims.release_after_failure(self.table, claim, "injected", MAX_ATTEMPTS, 0, now=self.now)
        except errors.ClaimLostError:
            released = None
        if not current:
            assert released is None
            self.tally.stale_refused += 1
            return
        expected = Status.FAILED if claim.attempts >= MAX_ATTEMPTS else Status.RETRYABLE
        assert released is expected
        self.status, self.owner = expected, None
        self.lease_until = self.now if expected is Status.RETRYABLE else None

    @rule(fails_midway=st.booleans())
    def sweep(self, fails_midway):
        for seen in sweeps.expired_leases(self.table, now=self.now):
            if seen.deletion_request_id != self.request_id:
                continue
            assert self.status is Status.PROCESSING and self.lease_until < self.now
            if fails_midway:
                # The sweeper found it (and may have sent a dead letter), then died
                # before its write: nothing changed, the next sweep finds it again.
                self.tally.sweeps_failed_midway += 1
                continue
            moved = sweeps.sweep(self.table, seen, MAX_ATTEMPTS, 0, now=self.now)
            expected = Status.FAILED if self.attempts >= MAX_ATTEMPTS else Status.RETRYABLE
            assert moved is expected
            self.status, self.owner = expected, None
            self.lease_until = self.now if expected is Status.RETRYABLE else None

    @rule()
    def restart(self):
        """The sweeper's second half: restart what waits past its time. The restart here
        never claims (it died before claiming) unless a worker's claim rule follows."""
        waiting = sweeps.overdue_scheduled(self.table, 0, now=self.now) + sweeps.due_retries(self.table, now=self.now)
        for seen in waiting:
            if seen.deletion_request_id != self.request_id:
                continue
            assert self.status in (Status.SCHEDULED, Status.RETRYABLE) and self.lease_until <= self.now
            if self.unclaimed_restarts >= MAX_ATTEMPTS:
                assert sweeps.fail_unclaimed(self.table, seen, "restarts died before claiming")
                self.status, self.lease_until = Status.FAILED, None
                return
            number = sweeps.mark_restart(self.table, seen, LEASE, now=self.now)
            self.restarts += 1
            self.unclaimed_restarts += 1
            assert number == self.restarts
            self.lease_until = self.now + LEASE
            self.tally.restarts_died += 1

    def teardown(self):
        """No request left behind: sweeper periods pass, each with a sweep, a restart and
        a fresh worker that claims and finishes; it must end COMPLETED or FAILED."""
        for period in range(3 * MAX_ATTEMPTS + 3):
            if self.status in (Status.COMPLETED, Status.FAILED):
                break
            self.now += 2 * LEASE
            self.sweep(fails_midway=period == 0)  # the first sweep of the drain dies midway
            self.restart()
            worker = f"drain-{period}"
            self.claim(worker)
            if worker in self.held:
                self.every_step(worker)
                self.complete(worker)
            self.table_agrees_with_the_model()
        assert self.status in (Status.COMPLETED, Status.FAILED), f"left behind: {self.status}"
        self.tally.drained[self.status.value] += 1

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
            max_examples=50,
            stateful_step_count=25,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow],
            database=None,
            # The same examples every run: the coverage checks below (zombies tried,
            # sweeps failed midway, ...) held in most random runs but not all (seen: no
            # stale write tried in one CI run), and a property that passes only by luck
            # proves nothing. The examples change when the code or Hypothesis does.
            derandomize=True,
        ),
    )
    assert tally.stale_accepted == 0
    # The property means something only if zombies did try, and holders did progress.
    assert tally.stale_refused > 0
    assert tally.current_accepted > 0
    assert tally.completed > 0
    assert tally.sweeps_failed_midway > 0 and tally.restarts_died > 0
    assert sum(tally.drained.values()) > 0
    print(
        f"stale writes refused {tally.stale_refused}, accepted {tally.stale_accepted}; "
        f"sweeps failed midway {tally.sweeps_failed_midway}; restarts died {tally.restarts_died}; drained {tally.drained}"
    )
