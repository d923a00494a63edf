"""The checkout handlers, run in this process against the embedded backend's DynamoDB.

Concurrency is real: copies of a request run in threads released together, and every
charge is counted in the ledger table, never taken from a handler's own answer. The
card processor is what it is in production, a Lambda function (deployed here from
functions/checkout on the same backend, with the tables and environment functions.tf
gives it); tests/lessons/checkout/test_stack.py repeats the key claims with the whole stack.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections import Counter

import pytest

from idemlab import build, module_spec
from idemlab import faults as idemlab_faults
from idemlab.clients import client, resource
from idemlab.lessons import checkout
from idemlab.module_spec import table_keys
from support import checkout_in_process as in_process
from support import invocation
from support.rounds import rounds

# Rounds: docs/DESIGN.md, "Rounds and their power"; 300 is the acceptance count (`make soak`).
# The Powertools guard's count detects its defect in 99.9 % of runs. The tests that assert a
# share of rounds (>= 90 % raced) keep 30: their count sets how often a sound run misses that bar.
GUARD_ROUNDS = rounds(measured=10, soak=300, variable="CHECKOUT_ROUNDS")
SHARE_ROUNDS = rounds(measured=30, soak=300, variable="CHECKOUT_ROUNDS")
COPIES = 10
RACE_WINDOW_MS = 20  # hand-rolled check-to-charge pause: wider than the threads' start skew
BAD_EVENTS = [
    {"amount": 1999, "currency": "EUR"},
    {"idempotency_key": "bad-amount-text", "amount": "abc", "currency": "EUR"},
    {"idempotency_key": "bad-amount-negative", "amount": -1999, "currency": "EUR"},
    {"idempotency_key": "bad-currency", "amount": 1999, "currency": "DOGE"},
]


@pytest.fixture(scope="module")
def tables(backend, lambda_role):
    """Private copies of the tables the checkouts and the card processor use, and the
    card processor deployed as a Lambda function over them."""
    dynamodb = client("dynamodb")
    suffix = uuid.uuid4().hex[:8]
    keys = table_keys("card_processor", *checkout.FUNCTION_KEYS)
    names = {key: f"inproc-{key}-{suffix}" for key in keys}
    for key, hash_key in keys.items():
        dynamodb.create_table(
            TableName=names[key],
            KeySchema=[{"AttributeName": hash_key, "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": hash_key, "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
    processor = f"inproc-card-processor-{suffix}"
    client("lambda").create_function(
        FunctionName=processor,
        Runtime="python3.12",
        Role=lambda_role,
        Handler="card_processor.handler",
        Code={"ZipFile": build.zip_bytes(build.source_files(checkout.FUNCTION_DIR))},
        Timeout=int(module_spec.function("card_processor")["timeout"]),
        Environment={"Variables": module_spec.environment("card_processor", names)},
    )
    with pytest.MonkeyPatch.context() as patch:
        for variable, value in in_process.environment(names, processor).items():
            patch.setenv(variable, value)
        yield names


@pytest.fixture(scope="module")
def ledger(tables):
    return checkout.Ledger(tables["ledger"])


def faults_table(tables: dict):
    """The private faults table, a boto3 Table on a resource of its own (see ``lessons.table``)."""
    return resource("dynamodb").Table(tables["faults"])


def invoke(strategy: str, request: dict) -> dict:
    return in_process.invoke_in_process(strategy, request)


def test_naive_retry_charges_twice(ledger):
    request = checkout.order()
    answers = [invoke("naive", request) for _ in range(2)]
    assert [a["outcome"] for a in answers] == [checkout.outcomes.CHARGED] * 2
    assert ledger.count(request["idempotency_key"]) == 2


@pytest.mark.parametrize("strategy", ["handrolled", "powertools"])
def test_sequential_retry_replays_the_first_charge(strategy, ledger):
    request = checkout.order()
    first, second = invoke(strategy, request), invoke(strategy, request)
    assert (first["outcome"], second["outcome"]) == (checkout.outcomes.CHARGED, checkout.outcomes.REPLAYED)
    assert second["charge_id"] == first["charge_id"]
    assert [s["step"] for s in first["trace"]] == ["check", "charge", "record"]
    assert [s["step"] for s in second["trace"]] == ["check"]
    assert ledger.count(request["idempotency_key"]) == 1


@pytest.mark.parametrize("strategy", checkout.STRATEGIES)
@pytest.mark.parametrize("event", BAD_EVENTS, ids=["no-key", "amount-text", "amount-negative", "currency"])
def test_bad_input_is_rejected_and_charges_nothing(strategy, event, ledger):
    before = sum(ledger.charges().values())
    answer = invoke(strategy, event)
    assert answer["outcome"] == checkout.outcomes.REJECTED
    assert answer["error"]["type"] == "InvalidRequestError" and answer["error"]["message"]
    assert sum(ledger.charges().values()) == before


@pytest.mark.parametrize("strategy", ["handrolled", "powertools"])
@pytest.mark.parametrize("downstream", [False, True], ids=["own-table", "downstream-key"])
def test_same_key_with_another_amount_is_rejected_without_a_charge(strategy, downstream, ledger):
    request = checkout.order(pass_key_downstream=downstream)
    assert invoke(strategy, request)["outcome"] == checkout.outcomes.CHARGED
    answer = invoke(strategy, {**request, "amount": request["amount"] + 1})
    assert answer["outcome"] == checkout.outcomes.REJECTED
    assert answer["error"]["type"] == "PayloadMismatchError"
    assert ledger.count(request["idempotency_key"]) == 1


def test_processor_refuses_a_reused_downstream_key_with_another_amount(ledger):
    # The naive checkout has no memory of its own, so this reaches the processor's check.
    request = checkout.order(pass_key_downstream=True)
    assert invoke("naive", request)["outcome"] == checkout.outcomes.CHARGED
    answer = invoke("naive", {**request, "amount": 1})
    assert (answer["outcome"], answer["error"]["type"]) == (checkout.outcomes.REJECTED, "PayloadMismatchError")
    assert ledger.count(request["idempotency_key"]) == 1


def _rounds(ledger, strategy, rounds_run: int, **options) -> tuple[list[int], list[list[str]]]:
    keys, answers = [], []
    for _ in range(rounds_run):
        request = checkout.order(prefix=f"inproc-{strategy}", **options)
        answers.append(sorted(a["outcome"] for a in checkout.concurrently(lambda: invoke(strategy, request), COPIES)))
        keys.append(request["idempotency_key"])
    counts = ledger.charges(keys)
    return [counts[k] for k in keys], answers


@pytest.mark.race
@pytest.mark.timeout(240)
def test_handrolled_concurrent_copies_double_charge_in_nearly_every_round(ledger, record_property):
    charges, _ = _rounds(ledger, "handrolled", SHARE_ROUNDS, check_act_delay_ms=RACE_WINDOW_MS)
    record_property("rounds_by_charges", dict(sorted(Counter(charges).items())))
    doubled = sum(1 for n in charges if n > 1)
    assert doubled >= 0.9 * SHARE_ROUNDS, (
        f"double charges in {doubled}/{SHARE_ROUNDS} rounds; charges per round: {sorted(set(charges))}"
    )


@pytest.mark.race
@pytest.mark.timeout(240)
def test_powertools_concurrent_copies_charge_exactly_once_every_round(ledger, record_property):
    charges, answers = _rounds(ledger, "powertools", GUARD_ROUNDS, check_act_delay_ms=RACE_WINDOW_MS)
    record_property("rounds_by_charges", dict(sorted(Counter(charges).items())))
    wrong = [n for n in charges if n != 1]
    assert not wrong, f"{len(wrong)}/{GUARD_ROUNDS} rounds charged {sorted(set(wrong))} times"
    per_round = {tuple(sorted(set(a) - {checkout.outcomes.IN_PROGRESS, checkout.outcomes.REPLAYED})) for a in answers}
    assert per_round == {(checkout.outcomes.CHARGED,)}, f"answers other than one charge per round: {per_round}"
    in_progress = sum(a.count(checkout.outcomes.IN_PROGRESS) for a in answers)
    assert in_progress > 0, "no copy ever saw the first one in progress: the copies did not overlap"


@pytest.mark.race
@pytest.mark.timeout(240)
def test_downstream_key_charges_once_even_when_the_handrolled_check_races(ledger, record_property):
    charges, answers = _rounds(
        ledger, "handrolled", SHARE_ROUNDS, check_act_delay_ms=RACE_WINDOW_MS, pass_key_downstream=True
    )
    record_property("rounds_by_charges", dict(sorted(Counter(charges).items())))
    wrong = [n for n in charges if n != 1]
    assert not wrong, f"{len(wrong)}/{SHARE_ROUNDS} rounds charged {sorted(set(wrong))} times"
    raced = sum(1 for a in answers if a.count(checkout.outcomes.CHARGED) > 1)
    assert raced >= 0.9 * SHARE_ROUNDS, (
        f"the check raced in only {raced}/{SHARE_ROUNDS} rounds, so the processor's key was barely tested"
    )


CRASHING_CHILD = """
import json, sys
strategy, request, timeout, tests = sys.argv[1], json.loads(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
sys.path.insert(0, tests)
from support import invocation
from support.checkout_in_process import invoke_in_process
invocation.stop_at_timeouts()  # this process is the invocation's environment: Lambda's stop ends it
print(json.dumps(invoke_in_process(strategy, request, timeout_seconds=timeout)))
"""
# tests/, where the child imports support.checkout_in_process from, as this process does
TESTS = os.path.dirname(os.path.dirname(invocation.__file__))
# The crashing invocation's timeout: Lambda stops it this long after it started, so the
# charge before the crash must fit in it on a loaded machine; short, because Powertools'
# in-progress record holds the key until then.
CRASHING_TIMEOUT_SECONDS = 5.0


def crash_after_charge(strategy: str, request: dict, tables, timeout_seconds: float) -> None:
    """One invocation, in a child process, that charges and then runs past its time."""
    idemlab_faults.arm(
        faults_table(tables),
        checkout.checkout_faults.AFTER_CHARGE,
        request["idempotency_key"],
        checkout.checkout_faults.CRASH,
    )
    child = subprocess.run(
        [sys.executable, "-c", CRASHING_CHILD, strategy, json.dumps(request), str(timeout_seconds), TESTS],
        capture_output=True,
        text=True,
        env=os.environ.copy(),
        timeout=30,
    )
    assert child.returncode == invocation.TIMED_OUT_EXIT_CODE, (
        f"the child should have run out of time after charging: {child.returncode} {child.stderr[-500:]}"
    )


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("downstream", "expected_charges"), [(False, 2), (True, 1)], ids=["no-downstream-key", "downstream-key"]
)
def test_a_retry_after_a_timeout_past_the_charge_charges_again_unless_the_key_goes_downstream(
    downstream, expected_charges, tables, ledger
):
    # Powertools sets in_progress_expiration to the invocation's remaining time at its start:
    # once the invocation has run out of time, its in-progress record no longer blocks the key.
    request = checkout.order(prefix="crash", pass_key_downstream=downstream)
    crash_after_charge("powertools", request, tables, timeout_seconds=CRASHING_TIMEOUT_SECONDS)
    assert ledger.count(request["idempotency_key"]) == 1

    answers = checkout.retry_until_answered(invoke, "powertools", request, within_seconds=5, every=0.2)
    assert [a["outcome"] for a in answers] == [checkout.outcomes.CHARGED], (
        "the first retry after the timeout takes the key"
    )
    assert answers[-1]["processor_replayed"] is downstream
    charges = ledger.count(request["idempotency_key"])
    assert charges == expected_charges, f"{charges} charges after a crash and a retry (downstream key: {downstream})"


@pytest.mark.timeout(60)
def test_handrolled_crash_after_the_charge_double_charges_a_sequential_retry(tables, ledger):
    # One request at a time, no race: the crashed attempt left no record, so the retry
    # finds none and charges again.
    request = checkout.order(prefix="crash")
    crash_after_charge("handrolled", request, tables, timeout_seconds=CRASHING_TIMEOUT_SECONDS)
    retry = invoke("handrolled", request)
    assert retry["outcome"] == checkout.outcomes.CHARGED
    assert ledger.count(request["idempotency_key"]) == 2


PROCESSOR_THAT_TIMES_OUT_AFTER_ITS_LEDGER_WRITE = """
import os, time, uuid, boto3
DYNAMODB = boto3.client("dynamodb")  # made at init, which the timeout does not count
def handler(event, context):
    DYNAMODB.put_item(TableName=os.environ["LEDGER_TABLE"], Item={
        "charge_id": {"S": "ch_" + uuid.uuid4().hex}, "reference": {"S": event["reference"]}})
    time.sleep(10)  # past the function's timeout: Lambda stops it, the caller hears Sandbox.Timedout
"""


@pytest.mark.timeout(60)
@pytest.mark.parametrize("strategy", checkout.STRATEGIES)
def test_a_processor_that_times_out_after_charging_gives_an_unknown_outcome(
    strategy, tables, ledger, make_function, monkeypatch
):
    # 3 s: room for the ledger write before the timeout even on a loaded machine (with 1 s, a
    # busy runner timed the processor out before it charged, and the ledger held nothing).
    processor = make_function(
        PROCESSOR_THAT_TIMES_OUT_AFTER_ITS_LEDGER_WRITE, timeout=3, environment={"LEDGER_TABLE": tables["ledger"]}
    )
    monkeypatch.setenv("CARD_PROCESSOR_FUNCTION", processor)
    request = checkout.order()
    answer = invoke(strategy, request)
    assert (answer["outcome"], answer["error"]["type"]) == (checkout.outcomes.UNKNOWN, "ChargeUnknownError"), answer
    assert "Sandbox.Timedout" in answer["error"]["message"]
    assert ledger.count(request["idempotency_key"]) == 1  # "failed" would have been a lie


def test_a_processor_refusal_is_a_failure_with_nothing_charged(tables, ledger, make_function, monkeypatch):
    refusing = "def handler(event, context):\n    raise type('InvalidRequestError', (Exception,), {})('amount too large for this card')\n"
    monkeypatch.setenv("CARD_PROCESSOR_FUNCTION", make_function(refusing))
    request = checkout.order()
    answer = invoke("naive", request)
    assert (answer["outcome"], answer["error"]["type"]) == (checkout.outcomes.FAILED, "ChargeFailedError"), answer
    assert ledger.count(request["idempotency_key"]) == 0


def test_without_a_card_processor_a_checkout_fails_with_a_configuration_error(tables, ledger, monkeypatch):
    # The Lambda code has no in-process processor to fall back on: it is deployed or missing.
    monkeypatch.delenv("CARD_PROCESSOR_FUNCTION")
    request = checkout.order()
    with pytest.raises(RuntimeError, match="CARD_PROCESSOR_FUNCTION is not set"):
        invoke("naive", request)
    assert ledger.count(request["idempotency_key"]) == 0


FAULT_ROUNDS = rounds(measured=10, soak=40)
FAULT_THREADS = 12


@pytest.mark.race
def test_an_armed_fault_fires_exactly_as_often_as_armed_when_invocations_race(tables):
    # The count is an atomic ADD (each arrival gets its own count, and only the first
    # `times` fail): racing invocations cannot both take the last strike. Real threads,
    # released together, over many rounds.
    faults = in_process.import_handler("charging.faults")
    errors = in_process.import_handler("charging.errors")
    context = in_process.InvocationContext(5)
    fired_per_round = Counter()
    for round_number in range(FAULT_ROUNDS):
        times = 1 + round_number % 3
        key = f"fault-race-{uuid.uuid4().hex[:8]}"
        idemlab_faults.arm(faults_table(tables), faults.AFTER_CHARGE, key, faults.LOSE_ANSWER, times)

        def reach_the_point() -> dict:
            try:
                faults.strike(faults.AFTER_CHARGE, key, context)
            except errors.ChargeUnknownError:
                return {"fired": True}
            return {"fired": False}

        fired = sum(a["fired"] for a in checkout.concurrently(reach_the_point, FAULT_THREADS))
        fired_per_round[fired - times] += 1
    assert fired_per_round == Counter({0: FAULT_ROUNDS}), f"fired minus armed, per round: {dict(fired_per_round)}"


def test_retrying_a_key_that_stays_held_names_the_last_outcome():
    # The key never frees (the checkout behind `held` always answers in_progress): the
    # retry gives up at its deadline and says what it last saw, and how often it asked.
    asked = []

    def held(strategy, request):
        asked.append(request["idempotency_key"])
        return {"strategy": strategy, "outcome": checkout.outcomes.IN_PROGRESS}

    request = checkout.order(prefix="held")
    with pytest.raises(TimeoutError, match=r"powertools: still in_progress after 0 s \(\d+ attempts\)") as gave_up:
        checkout.retry_until_answered(held, "powertools", request, within_seconds=0.3, every=0.05)
    assert f"({len(asked)} attempts)" in str(gave_up.value)
    assert len(asked) >= 2
