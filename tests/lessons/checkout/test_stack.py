"""The deployed checkout functions on the embedded backend, invoked through Lambda.

Each copy of a request is a real Invoke, served by its own worker process (an execution
environment); the checkouts call the card processor with another Invoke. Charges are
counted in the ledger table.
"""

from __future__ import annotations

from collections import Counter

import pytest

from idemlab.lessons import checkout
from support.rounds import rounds

pytestmark = [pytest.mark.stack, pytest.mark.any_backend]

# Rounds: docs/DESIGN.md, "Rounds and their power"; 300 is the acceptance count (`make soak`).
# A guard's count detects its defect in 99.9 % of runs. The hand-rolled demonstration asserts
# a share (>= 90 % of rounds double-charged): its count sets how often a sound run misses
# that bar (about 1 round in 20 does not double-charge here), so it keeps 50.
GUARD_ROUNDS = rounds(measured=10, soak=300, variable="CHECKOUT_ROUNDS")
SHARE_ROUNDS = rounds(measured=50, soak=300, variable="CHECKOUT_ROUNDS")
COPIES = 10
RACE_WINDOW_MS = 100  # wider than the spread of ten warm invocations released together


@pytest.fixture(scope="module")
def shop(stack):
    return checkout.Checkout(stack)


def _rounds(shop, strategy, rounds_run: int, **options) -> tuple[int, list[int]]:
    """Charges in a first round, which starts the execution environments, then per round.

    Cold starts spread the first round's copies over up to a second, so a race window of
    a tenth of that may not overlap; it is counted apart, but it must not double-charge
    where the strategy promises one charge.
    """
    warm_up = checkout.run_rounds(shop.invoke, shop.ledger, strategy, 1, COPIES, **options)[0]
    return warm_up, checkout.run_rounds(shop.invoke, shop.ledger, strategy, rounds_run, COPIES, **options)


def test_naive_sequential_duplicates_always_charge_twice(shop):
    charges = []
    for _ in range(10):
        request = checkout.order()
        answers = [shop.invoke("naive", request) for _ in range(2)]
        assert [a["outcome"] for a in answers] == [checkout.outcomes.CHARGED] * 2
        charges.append(shop.charges(request))
    assert charges == [2] * 10, f"charges per duplicated request: {charges}"


@pytest.mark.parametrize("strategy", checkout.STRATEGIES)
def test_bad_input_through_lambda_is_rejected_and_charges_nothing(strategy, shop):
    before = sum(shop.ledger.charges().values())
    events = [
        {"amount": 1999, "currency": "EUR"},
        checkout.order(amount="19.99"),
        checkout.order(amount=-1999),
        checkout.order(currency="DOGE"),
    ]
    answers = [shop.invoke(strategy, event) for event in events]
    assert [(a["outcome"], a["error"]["type"]) for a in answers] == [
        (checkout.outcomes.REJECTED, "InvalidRequestError")
    ] * 4
    assert sum(shop.ledger.charges().values()) == before


def test_warm_up_starts_one_environment_per_copy(shop):
    pids = shop.start_environments("handrolled", copies=3)
    assert len(pids) == 3, f"warm-up answered from processes {sorted(pids)}"


@pytest.mark.race
@pytest.mark.timeout(900)
def test_powertools_charges_exactly_once_in_every_round(shop, record_property):
    warm_up, charges = _rounds(shop, "powertools", GUARD_ROUNDS, check_act_delay_ms=RACE_WINDOW_MS)
    record_property("rounds_by_charges", dict(sorted(Counter([warm_up, *charges]).items())))
    wrong = [n for n in [warm_up, *charges] if n != 1]
    assert not wrong, f"{len(wrong)}/{GUARD_ROUNDS + 1} rounds of {COPIES} copies charged {sorted(set(wrong))} times"


@pytest.mark.race
@pytest.mark.timeout(900)
def test_downstream_key_charges_exactly_once_in_every_round(shop, record_property):
    # The hand-rolled check races here on purpose, so all copies reach the processor.
    warm_up, charges = _rounds(
        shop, "handrolled", GUARD_ROUNDS, check_act_delay_ms=RACE_WINDOW_MS, pass_key_downstream=True
    )
    record_property("rounds_by_charges", dict(sorted(Counter([warm_up, *charges]).items())))
    wrong = [n for n in [warm_up, *charges] if n != 1]
    assert not wrong, f"{len(wrong)}/{GUARD_ROUNDS + 1} rounds of {COPIES} copies charged {sorted(set(wrong))} times"


@pytest.mark.race
@pytest.mark.timeout(900)
def test_handrolled_with_a_widened_window_double_charges_in_nine_rounds_of_ten(shop, record_property):
    _, charges = _rounds(shop, "handrolled", SHARE_ROUNDS, check_act_delay_ms=RACE_WINDOW_MS)
    record_property("rounds_by_charges", dict(sorted(Counter(charges).items())))
    doubled = sum(1 for n in charges if n > 1)
    assert doubled >= 0.9 * SHARE_ROUNDS, (
        f"double charges in {doubled}/{SHARE_ROUNDS} rounds; charges per round seen: {sorted(set(charges))}"
    )


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    ("downstream", "expected_charges"), [(False, 2), (True, 1)], ids=["no-downstream-key", "downstream-key"]
)
def test_crash_after_charge_charges_again_unless_the_key_goes_downstream(downstream, expected_charges, shop):
    request = checkout.order(prefix="crash", pass_key_downstream=downstream)
    shop.arm_crash_after_charge(request)
    first = shop.invoke("powertools", request)
    # The crash is a timeout, which ends an invocation alike on AWS, LocalStack and here.
    assert (first["outcome"], first["error"]["errorType"]) == (checkout.CRASHED, "Sandbox.Timedout"), first
    assert shop.charges(request) == 1

    # Its in-progress record expired when its time ran out: the next retry takes the key.
    answers = checkout.retry_until_answered(shop.invoke, "powertools", request, within_seconds=10)
    assert answers[-1]["outcome"] == checkout.outcomes.CHARGED, answers[-1]
    assert answers[-1]["processor_replayed"] is downstream
    charges = shop.charges(request)
    assert charges == expected_charges, f"{charges} charges after a crash and retries (downstream key: {downstream})"


@pytest.mark.parametrize(
    ("downstream", "expected_charges"), [(False, 2), (True, 1)], ids=["no-downstream-key", "downstream-key"]
)
def test_a_lost_processor_answer_is_unknown_and_only_the_downstream_key_resolves_it(downstream, expected_charges, shop):
    request = checkout.order(prefix="lost", pass_key_downstream=downstream)
    shop.arm_lost_answer(request)
    lost = shop.invoke("powertools", request)
    assert lost["outcome"] == checkout.outcomes.UNKNOWN, lost
    assert shop.charges(request) == 1  # it did charge
    retry = shop.invoke("powertools", request)
    assert (retry["outcome"], retry["processor_replayed"]) == (checkout.outcomes.CHARGED, downstream)
    assert shop.charges(request) == expected_charges


def test_the_copies_fit_the_account_concurrency_limit(shop):
    limit = shop.concurrency_limit()  # the embedded backend's enforced limit (40 unless configured)
    assert limit > 0
    assert checkout.copies_that_fit(5, limit) == min(5, (limit - checkout.CONCURRENCY_HEADROOM) // 2)
    assert checkout.copies_that_fit(5, 10) == 4  # a new account's quota: 4 checkouts + 4 processor calls + headroom
    assert checkout.copies_that_fit(5, 1000) == 5
    with pytest.raises(RuntimeError, match="concurrency quota"):
        checkout.copies_that_fit(5, 5)


@pytest.mark.parametrize("key", ["card_processor", *checkout.FUNCTION_KEYS])
def test_the_environment_read_from_functions_tf_is_what_the_deployed_function_has(stack, key):
    # The in-process tests build their environment from functions.tf; this pins it to the
    # deployment, so the two cannot drift apart.
    from idemlab import module_spec
    from idemlab.clients import client

    deployed = client("lambda").get_function_configuration(FunctionName=stack["functions"][key])["Environment"][
        "Variables"
    ]
    expected = module_spec.environment(key, stack["tables"], stack["functions"])
    assert {name: deployed.get(name) for name in expected} == expected


def test_the_table_keys_read_from_tables_tf_are_the_deployed_tables_keys(stack):
    from idemlab.clients import client
    from idemlab.module_spec import table_keys

    keys = table_keys("card_processor", *checkout.FUNCTION_KEYS)
    dynamodb = client("dynamodb")
    deployed = {key: dynamodb.describe_table(TableName=stack["tables"][key])["Table"]["KeySchema"] for key in keys}
    assert deployed == {key: [{"AttributeName": hash_key, "KeyType": "HASH"}] for key, hash_key in keys.items()}
