"""The cost bench's arithmetic: request units, dollars, and the split of counted requests.

No backend here: these are the sums the bench applies to what it counts.
"""

from __future__ import annotations

import pytest

from idemlab.bench import prices, strategy_report
from idemlab.bench.strategies import BY_KEY


def test_a_million_single_writes_cost_the_write_unit_price():
    assert prices.usd_per_million_invocations({"PutItem": 1}) == pytest.approx(prices.USD_PER_MILLION_WRITE_UNITS)


def test_strongly_consistent_reads_cost_one_read_unit_each():
    assert prices.request_units({"GetItem": 3}) == (3, 0)


def test_a_failed_conditional_write_is_priced_like_any_write():
    # Refused claims are writes too: the duplicate's PutItem is billed.
    assert prices.request_units({"PutItem": 1, "UpdateItem": 1}) == (0, 2)


def test_a_transaction_costs_two_write_units_per_item():
    assert prices.request_units({"TransactWriteItems": 1}) == (0, 2 * prices.ITEMS_PER_TRANSACTION)


def test_powertools_first_delivery_dollars_add_up():
    # 1 probe read + (INPROGRESS put, ledger put, COMPLETED update) writes.
    calls = {"GetItem": 1, "PutItem": 2, "UpdateItem": 1}
    expected = 1 * prices.USD_PER_MILLION_READ_UNITS + 3 * prices.USD_PER_MILLION_WRITE_UNITS
    assert prices.usd_per_million_invocations(calls) == pytest.approx(expected)


def test_zero_counts_are_ignored_and_scans_are_refused():
    assert prices.request_units({"Query": 0, "PutItem": 0}) == (0, 0)
    with pytest.raises(prices.UnpricedAction):
        prices.request_units({"Scan": 1})


def test_prices_are_dated_and_cite_their_source():
    assert prices.SOURCE.startswith("https://aws.amazon.com/dynamodb/pricing")
    assert prices.PRICES_TAKEN_ON in prices.citation() and "check the current page" in prices.citation()


def _measured(delivery: str, by_table: dict, effects: float, invocations: int) -> dict:
    shape = {
        "calls_by_table_per_sample": by_table,
        "effects_per_sample": effects,
        "invocations_per_sample": invocations,
    }
    return {delivery: shape}


def test_a_race_of_the_hand_rolled_check_is_excess_puts_named_as_a_race():
    # 16 copies, 3 passed the check: 16 check reads, 3 charges (ledger puts), 3 probes, 3 records.
    by_table = {
        "handrolled_idempotency": {"GetItem": 16, "PutItem": 3},
        "ledger": {"PutItem": 3},
        "faults": {"GetItem": 3},
    }
    part = strategy_report.attribute(
        BY_KEY["checkout_handrolled"], _measured("concurrent", by_table, effects=3, invocations=16), "concurrent", 16
    )
    assert part["effect"] == {"PutItem": 3}
    assert part["probes"] == {"GetItem": 3}
    assert part["own"] == {"GetItem": 16, "PutItem": 3}
    assert part["minimum"] == {"GetItem": 16, "PutItem": 1}
    assert part["excess"] == {"PutItem": 2}
    assert part["why"] and part["why"][0].startswith("race")


def test_the_claim_steps_probes_are_not_charged_to_the_claim():
    # 4 workers, 1 wins: 4 probes before claiming, 1 after the win, 4 conditional updates.
    by_table = {"deletion_requests": {"UpdateItem": 4}, "faults": {"GetItem": 5}}
    part = strategy_report.attribute(
        BY_KEY["deletion_claim"], _measured("concurrent", by_table, effects=1, invocations=4), "concurrent", 4
    )
    assert part["own"] == {"UpdateItem": 4} == part["minimum"]
    assert part["probes"] == {"GetItem": 5}
    assert part["excess"] == {} and part["why"] == []


def test_probes_are_what_the_faults_table_served_however_many_the_code_makes():
    # A fault check that reads twice, or none at all (a stack without the faults table):
    # the strategy's own requests stay at its minimum either way.
    for probes in ({"GetItem": 2, "UpdateItem": 1}, {}):
        by_table = {"deletion_requests": {"UpdateItem": 1}, "faults": probes}
        part = strategy_report.attribute(
            BY_KEY["deletion_claim"], _measured("first", by_table, effects=1, invocations=1), "first", 4
        )
        assert part["probes"] == probes and part["own"] == {"UpdateItem": 1} == part["minimum"]
        assert part["why"] == []


def test_an_unknown_extra_request_is_reported_as_unexplained():
    by_table = {"vehicles": {"PutItem": 1, "GetItem": 1}}
    part = strategy_report.attribute(
        BY_KEY["vehicle_idempotent"], _measured("duplicate", by_table, effects=0, invocations=1), "duplicate", 16
    )
    assert part["excess"] == {"GetItem": 1}
    assert part["why"][0].startswith("unexplained")


def test_naive_charges_are_the_effect_and_cost_what_the_processor_writes():
    by_table = {"ledger": {"PutItem": 1}}
    part = strategy_report.attribute(
        BY_KEY["checkout_naive"], _measured("duplicate", by_table, effects=1, invocations=1), "duplicate", 16
    )
    assert part["own"] == {} and part["effect"] == {"PutItem": 1}
    assert part["usd_per_million_invocations"] == pytest.approx(prices.USD_PER_MILLION_WRITE_UNITS)
    assert part["own_usd_per_million_invocations"] == 0
