"""`idemlab.explore`: every crash point and every interleaving of two copies, deterministically.

The handlers under test are a small module written to a temporary folder; each charges an
order by writing a row to the charges table (the effect, counted per order).
"""

from __future__ import annotations

import textwrap
import uuid

import pytest

from idemlab.testing import DuplicateEffectError, ExplorationReport, Handler, LostEffectError, ScheduleError

SHOP = """
import os, time, uuid
import boto3

dynamodb = boto3.client("dynamodb")
CHARGES, ORDERS, CLAIMS = os.environ["CHARGES"], os.environ["ORDERS"], os.environ["CLAIMS"]


def charge(order_id):
    dynamodb.put_item(TableName=CHARGES, Item={"pk": {"S": f"{order_id}#{uuid.uuid4().hex}"}, "order": {"S": order_id}})


def naive(event, context):
    charge(event["order_id"])
    return "charged"


def claim_first(event, context):
    # The charge is the claim: one conditional write that only one copy can win.
    try:
        dynamodb.put_item(
            TableName=CHARGES,
            Item={"pk": {"S": event["order_id"]}, "order": {"S": event["order_id"]}},
            ConditionExpression="attribute_not_exists(pk)",
        )
    except dynamodb.exceptions.ConditionalCheckFailedException:
        return "already charged"
    return "charged"


def check_outside_claim(event, context):
    # Safe against every crash, and against copies sent together nearly always: its
    # done-check sits outside the claim, and the claim is released once the order is done.
    key = {"pk": {"S": event["order_id"]}}
    if "Item" in dynamodb.get_item(TableName=ORDERS, Key=key, ConsistentRead=True):
        return "already done"
    try:
        dynamodb.put_item(TableName=CLAIMS, Item=key, ConditionExpression="attribute_not_exists(pk)")
    except dynamodb.exceptions.ConditionalCheckFailedException:
        raise RuntimeError("in progress: retry later") from None
    charge(event["order_id"])
    dynamodb.put_item(TableName=ORDERS, Item=key)
    dynamodb.delete_item(TableName=CLAIMS, Key=key)
    return "charged"


def check_outside_claim_slowly(event, context):
    # The same, each copy first working for 2 s (as a handler loading a model would).
    time.sleep(2)
    return check_outside_claim(event, context)


def leased_claim(event, context):
    # A claim that lapses with the invocation that took it, as Powertools' in-progress record
    # does: a retry while it holds is told to come back later; one after it lapsed charges.
    key = {"pk": {"S": event["order_id"]}}
    if "Item" in dynamodb.get_item(TableName=ORDERS, Key=key, ConsistentRead=True):
        return "already done"
    now = time.time()
    try:
        dynamodb.put_item(
            TableName=CLAIMS,
            Item={**key, "until": {"N": str(now + context.get_remaining_time_in_millis() / 1000)}},
            ConditionExpression="attribute_not_exists(pk) OR #until < :now",
            ExpressionAttributeNames={"#until": "until"},
            ExpressionAttributeValues={":now": {"N": str(now)}},
        )
    except dynamodb.exceptions.ConditionalCheckFailedException:
        raise RuntimeError("in progress: retry later") from None
    charge(event["order_id"])
    dynamodb.put_item(TableName=ORDERS, Item=key)
    return "charged"


def claim_then_charge(event, context):
    # A claim that never expires: a copy that dies between the claim and the charge leaves
    # the order claimed, and every retry answers "already done" without charging.
    key = {"pk": {"S": event["order_id"]}}
    try:
        dynamodb.put_item(TableName=CLAIMS, Item=key, ConditionExpression="attribute_not_exists(pk)")
    except dynamodb.exceptions.ConditionalCheckFailedException:
        return "already done"
    charge(event["order_id"])
    return "charged"


def ten_steps(event, context):
    # Eight reads, then the charge as one conditional write, then the order marked done.
    key = {"pk": {"S": event["order_id"]}}
    for _ in range(8):
        dynamodb.get_item(TableName=ORDERS, Key=key)
    claim_first(event, context)
    dynamodb.put_item(TableName=ORDERS, Item=key)
    return "charged"
"""
REPEATS = 20  # a kept schedule id must give the same outcome every time


@pytest.fixture(scope="module")
def code(tmp_path_factory):
    root = tmp_path_factory.mktemp("explore-code")
    (root / "shop.py").write_text(textwrap.dedent(SHOP))
    return root


@pytest.fixture
def charges(idemlab):
    """The shop's tables; counts an order's charges."""
    table = idemlab.make_table("explore-charges")
    for name in ("orders", "claims"):
        idemlab.environment[name.upper()] = idemlab.make_table(f"explore-{name}").name
    idemlab.environment["CHARGES"] = table.name

    def count(event) -> int:
        return sum(1 for item in table.scan(ConsistentRead=True)["Items"] if item["order"] == event["order_id"])

    return count


def new_order(number: int) -> dict:
    return {"order_id": f"order-{number}-{uuid.uuid4().hex[:8]}"}


def shop(name: str, code) -> Handler:
    return Handler.module(f"shop.{name}", code_root=code)


def test_naive_handler_fails_at_a_plain_retry(idemlab, code, charges):
    with pytest.raises(DuplicateEffectError) as failure:
        idemlab.explore(shop("naive", code), new_order, charges)
    report = failure.value.report
    assert report.failure.schedule.id == "twice"
    assert report.verdict == "DUPLICATE"
    assert [step["operation"] for step in report.steps] == ["PutItem"]
    assert "schedule='twice'" in str(failure.value)


def test_claim_first_handler_passes_every_schedule_with_a_report(idemlab, code, charges):
    report = idemlab.explore(shop("claim_first", code), new_order, charges)
    assert isinstance(report, ExplorationReport) and report.passed
    assert len(report.runs) == report.planned == len(report.runs)
    assert "exactly once in every schedule" in report.message()
    print(report.message())
    print([(run.schedule.id, round(run.seconds, 2)) for run in report.runs])


def test_check_outside_the_claim_is_found_in_one_interleaving(idemlab, code, charges):
    with pytest.raises(DuplicateEffectError) as failure:
        idemlab.explore(shop("check_outside_claim", code), new_order, charges)
    report = failure.value.report
    print(report.message())
    print([(run.schedule.id, round(run.seconds, 2)) for run in report.runs])
    # No crash schedule breaks it: only copy B reading "not done" before copy A records it,
    # then claiming after A released its claim.
    assert report.failure.schedule.id == "pair-0-1"
    assert all(not run.schedule.crash or run.counts <= 1 for run in report.runs)
    operations = [step["operation"] for step in report.steps]
    assert operations == ["GetItem", "PutItem", "PutItem", "PutItem", "DeleteItem"]


def test_a_copy_waiting_for_the_other_is_not_stopped_by_the_functions_timeout(idemlab, code, charges):
    # Copy A waits at its start while copy B works 2 s to its point 1; then A works 2 s itself:
    # past the 3 s timeout, were the wait counted against it (it was: A died, nothing was found).
    handler = shop("check_outside_claim_slowly", code)
    with pytest.raises(DuplicateEffectError) as failure:
        idemlab.explore(handler, new_order, charges, schedule="pair-0-1", timeout=3)
    assert [copy.result.ok for copy in failure.value.report.failure.copies] == [True, True]
    assert failure.value.report.failure.counts == 2


def test_a_kept_schedule_id_gives_the_same_outcome_every_time(idemlab, code, charges):
    outcomes = []
    for _ in range(REPEATS):
        with pytest.raises(DuplicateEffectError) as failure:
            idemlab.explore(shop("check_outside_claim", code), new_order, charges, schedule="pair-0-1")
        outcomes.append((failure.value.report.failure.counts, failure.value.report.verdict))
    assert outcomes == [(2, "DUPLICATE")] * REPEATS, outcomes


def test_a_retry_refused_while_a_dead_copy_holds_its_lease_is_followed_by_a_late_one(idemlab, code, charges):
    # Copy A dies right after charging; the retry is refused "in progress"; the event source
    # delivers again once A's lease has lapsed, and that copy charges again. The explorer
    # stopped at the refused retry before (the effect was there), and named a later schedule.
    with pytest.raises(DuplicateEffectError) as failure:
        idemlab.explore(shop("leased_claim", code), new_order, charges, timeout=3)
    report = failure.value.report
    assert report.failure.schedule.id == "crash-exit-3"
    copies = report.failure.copies
    assert [copy.name for copy in copies] == ["A", "B", "C"]
    assert copies[1].result.error_type == "RuntimeError" and copies[2].result.ok


def test_a_schedule_whose_point_the_handler_never_reaches_says_so(idemlab, code, charges):
    with pytest.raises(ScheduleError, match="never reached point 7"):
        idemlab.explore(shop("claim_first", code), new_order, charges, schedule="crash-exit-7")


def test_a_ten_step_handler_is_explored_whole(idemlab, code, charges):
    report = idemlab.explore(shop("ten_steps", code), new_order, charges)
    print(report.message())
    assert len(report.steps) == 10
    # 1 plain retry, 22 crashes (points 0 to 10, each way), 90 pairs and 9 zombies.
    assert len(report.runs) == report.planned == 122


def test_a_named_function_is_one_step_with_the_calls_inside_it(idemlab, code, charges):
    # A named effect is a provider's client: its own calls are not points the handler stops at.
    with pytest.raises(DuplicateEffectError) as failure:
        idemlab.explore(shop("naive", code), new_order, charges, effects=("shop.charge",))
    steps = [(step["service"], step["operation"]) for step in failure.value.report.steps]
    assert steps == [("effect", "shop.charge")]


def test_a_claim_that_outlives_a_crash_loses_the_charge(idemlab, code, charges):
    with pytest.raises(LostEffectError) as failure:
        idemlab.explore(shop("claim_then_charge", code), new_order, charges, timeout=3)
    report = failure.value.report
    assert (report.verdict, report.failure.schedule.id) == ("LOST", "crash-exit-1")
    # The retry answered "already done" without charging; the late retry (C) does too.
    assert [copy.name for copy in report.failure.copies] == ["A", "B", "C"]
