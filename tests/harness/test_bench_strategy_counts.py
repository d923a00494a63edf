"""Each strategy's DynamoDB requests, counted at the backend on the deployed stack, are
its stated minimum, or off it only where the catalogue says why.

A real assertion about behaviour: an extra read that a library starts making, a record
write that moves, a probe that multiplies, shows up here as a count that does not match.
Latency is measured too, and never asserted.
"""

from __future__ import annotations

import time

import pytest

from idemlab import settings
from idemlab.bench import cost_of_idempotency, strategies, strategy_report
from idemlab.clients import client

pytestmark = pytest.mark.stack

SAMPLES = 2
COPIES = 4  # enough for a race and for refused claims; the bench itself uses 16
ROUNDS = 1


class SharedBackendBench(cost_of_idempotency.StrategyBench):
    """The bench on the suite's shared backend, which also runs other tests' leftovers
    (retried events, the sweeper restarting stuck deletions): each sample starts after
    GUARD_SECONDS without a DynamoDB request and is taken again if one arrives within as
    long after it, so a workflow the sweeper restarts meanwhile is not counted as the strategy's."""

    GUARD_SECONDS = 0.2

    def _try(self, strategy, events):
        self.wait_until_quiet(self.GUARD_SECONDS)
        return super()._try(strategy, events)

    def undisturbed(self, before, after):
        time.sleep(self.GUARD_SECONDS)
        return self.counted() == after and super().undisturbed(before, after)


@pytest.fixture(scope="module")
def result(stack):
    bench = SharedBackendBench(stack, settings.endpoint_url())
    return strategy_report.report(cost_of_idempotency.run(bench, SAMPLES, COPIES, ROUNDS))


def rows(result, *keys):
    return [result["strategies"][key] for key in keys]


def test_every_count_is_at_its_minimum_or_explained(result):
    assert strategy_report.unexplained(result) == []


def test_the_card_processor_writes_one_ledger_entry_per_charge(result):
    assert result["processor_calls_per_charge"] == {"PutItem": 1}


@pytest.mark.parametrize("key", ["vehicle_idempotent", "checkout_powertools", "deletion_claim"])
def test_claiming_strategies_are_at_their_minimum_first_duplicate_and_racing(result, key):
    row = result["strategies"][key]
    for delivery in strategy_report.DELIVERIES:
        assert row[delivery]["own"] == row[delivery]["minimum"], f"{key}, {delivery}: {row[delivery]}"


def test_a_powertools_duplicate_is_one_refused_put_and_no_read(result):
    duplicate = result["strategies"]["checkout_powertools"]["duplicate"]
    assert duplicate["counted"] == {"PutItem": 1}
    assert duplicate["effects"] == 0


def test_the_local_cache_answers_a_sequential_duplicate_without_dynamodb(result):
    cached = result["strategies"]["checkout_powertools_cached"]
    assert cached["first"]["own"] == cached["first"]["minimum"]
    assert cached["duplicate"]["counted"] == {}
    assert cached["duplicate"]["excess"] == {"PutItem": -1} and "local cache" in cached["duplicate"]["why"][0]


def test_the_local_cache_saves_nothing_on_copies_racing_the_first(result):
    # In-progress records are never cached, and each racing copy has its own environment.
    cached = result["strategies"]["checkout_powertools_cached"]["concurrent"]
    assert all(n <= 0 for n in cached["excess"].values())
    assert cached["own"].get("UpdateItem") == 1


def test_naive_handlers_make_no_idempotency_request_and_repeat_their_effect(result):
    for row in rows(result, "vehicle_naive", "checkout_naive"):
        assert [row[d]["own"] for d in strategy_report.DELIVERIES] == [{}, {}, {}]
        assert row["duplicate"]["effects"] == 1  # a second row, a second charge
        assert row["concurrent"]["effects"] == COPIES


def test_the_hand_rolled_check_is_at_minimum_alone_and_races_together(result):
    row = result["strategies"]["checkout_handrolled"]
    assert row["first"]["own"] == row["first"]["minimum"]
    assert row["duplicate"]["own"] == row["duplicate"]["minimum"]
    racing = row["concurrent"]
    # Every copy that got past the check charged once and wrote its record once.
    assert racing["excess"] in ({}, {"PutItem": racing["effects"] - 1})


class DisturbedBench(SharedBackendBench):
    """The bench on the shared backend, where something else reads DynamoDB right after
    the ``disturb``-th counted try (one real GetItem, inside the guard window)."""

    def __init__(self, outputs, endpoint_url, disturb: set[int]):
        super().__init__(outputs, endpoint_url)
        self.disturb, self.tries = disturb, 0

    def undisturbed(self, before, after):
        self.tries += 1
        if self.tries in self.disturb:
            self._dynamodb.get_item(
                TableName=self.outputs["tables"]["ledger"], Key={"charge_id": {"S": "someone-else"}}
            )
        return super().undisturbed(before, after)


@pytest.mark.parametrize("disturb", [{1}, {2}, {3}], ids=["first", "duplicate", "concurrent"])
def test_a_disturbed_sample_is_taken_again_on_a_fresh_request_and_agrees_with_the_ledger(stack, disturb):
    naive = strategies.BY_KEY["checkout_naive"]
    bench = DisturbedBench(stack, settings.endpoint_url(), disturb)
    first, duplicate, together = [], [], []
    bench.take(naive, [(first, 1), (duplicate, 1)])
    bench.take(naive, [(together, 2)])
    assert bench.tries > 3, "the disturbance was not seen"  # three samples kept, at least one try taken again
    # Each kept sample is on a request of its own, and the ledger holds exactly its charges.
    assert first[0].request_key == duplicate[0].request_key != together[0].request_key
    assert bench.ledger_disagreements(first + duplicate + together) == {}


@pytest.fixture
def claim_without_faults(stack):
    """The claim step deployed without the faults table: its fault hooks then read nothing."""
    functions = client("lambda", settings.endpoint_url())
    name = stack["functions"]["claim_deletion"]
    environment = functions.get_function_configuration(FunctionName=name)["Environment"]["Variables"]
    assert "FAULTS_TABLE" in environment
    functions.update_function_configuration(
        FunctionName=name, Environment={"Variables": {k: v for k, v in environment.items() if k != "FAULTS_TABLE"}}
    )
    functions.get_waiter("function_updated_v2").wait(FunctionName=name)
    try:
        yield stack
    finally:
        functions.update_function_configuration(FunctionName=name, Environment={"Variables": environment})
        functions.get_waiter("function_updated_v2").wait(FunctionName=name)


def test_a_handler_without_fault_probes_is_counted_as_it_runs_not_as_modelled(claim_without_faults):
    # The probes are what the faults table served, so a handler that makes none (or a
    # fault check that changes) is neither charged for probes it did not make nor off its minimum.
    bench = SharedBackendBench(claim_without_faults, settings.endpoint_url())
    claim = strategies.BY_KEY["deletion_claim"]
    result = strategy_report.report(cost_of_idempotency.run(bench, samples=1, copies=3, rounds=1, strategies=[claim]))
    row = result["strategies"]["deletion_claim"]
    for delivery in strategy_report.DELIVERIES:
        assert row[delivery]["probes"] == {}, f"{delivery}: {row[delivery]}"
        assert row[delivery]["own"] == row[delivery]["minimum"], f"{delivery}: {row[delivery]}"
    assert strategy_report.unexplained(result) == []
