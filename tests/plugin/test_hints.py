"""The plugin's failure message explains what went wrong from what the copies did, not from
how they were sent: each case below is a handler with one known flaw, run on the embedded
backend, and the message must name that flaw and nothing it did not do.
"""

from __future__ import annotations

import textwrap

import pytest

from idemlab import testing
from idemlab.testing import Crash, DeliveryError, DuplicateEffectError, Handler

HINTS = """
import os
import time

import boto3
from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer, IdempotencyConfig, idempotent

effects = boto3.resource("dynamodb").Table(os.environ["EFFECTS_TABLE"])
LONG_REASON = "the card processor refused the charge because " + "the account is closed, " * 8 + "end of reason"


def record(event):
    effects.put_item(Item={"pk": f"{event['id']}#{time.time_ns()}", "id": event["id"]})


def naive(event, context):
    record(event)
    return "recorded"


def check_then_act(event, context):
    done = effects.get_item(Key={"pk": f"done#{event['id']}"}, ConsistentRead=True).get("Item")
    if done:
        return "already done"
    time.sleep(0.1)
    record(event)
    effects.put_item(Item={"pk": f"done#{event['id']}", "id": "marker"})
    return "recorded"


def claim_first(event, context):
    try:
        effects.put_item(Item={"pk": f"claim#{event['id']}", "id": "marker"}, ConditionExpression="attribute_not_exists(pk)")
    except effects.meta.client.exceptions.ConditionalCheckFailedException:
        return "already claimed"
    record(event)
    return "recorded"


def missing_table(event, context):
    boto3.resource("dynamodb").Table("hint-no-such-table").put_item(Item={"pk": event["id"]})


def hangs(event, context):
    time.sleep(60)


def refuses(event, context):
    raise ValueError(LONG_REASON)


@idempotent(
    persistence_store=DynamoDBPersistenceLayer(table_name=os.environ["POWERTOOLS_TABLE"]),
    config=IdempotencyConfig(event_key_jmespath="id"),
)
def with_powertools(event, context):
    record(event)
    return "recorded"
"""
BROKEN = """
import os

import no_such_dependency_anywhere


def handler(event, context):
    return "never"
"""
LONG_REASON = "the card processor refused the charge because " + "the account is closed, " * 8 + "end of reason"


@pytest.fixture(scope="module")
def code(tmp_path_factory):
    root = tmp_path_factory.mktemp("hint-code")
    (root / "hints.py").write_text(textwrap.dedent(HINTS))
    (root / "broken.py").write_text(textwrap.dedent(BROKEN))
    return root


@pytest.fixture
def effects(idemlab):
    table = idemlab.make_table("hint-effects")
    idemlab.environment["EFFECTS_TABLE"] = table.name
    idemlab.environment["POWERTOOLS_TABLE"] = idemlab.powertools_table("hint-idempotency").name

    def count(event) -> int:
        return sum(1 for item in table.scan(ConsistentRead=True)["Items"] if item["id"] == event["id"])

    return count


def hint(code, function: str) -> Handler:
    return Handler.module(f"hints.{function}", code_root=code)


def events(prefix: str):
    return lambda number: {"id": f"{prefix}-{number}"}


def failure_of(idemlab, handler, effects, **options) -> str:
    with pytest.raises(DuplicateEffectError) as failure:
        idemlab.assert_exactly_once(handler, options.pop("make_event"), effects, **options)
    return str(failure.value)


def test_a_handler_that_checks_nothing_is_not_told_it_checked(idemlab, code, effects):
    message = failure_of(idemlab, hint(code, "naive"), effects, make_event=events("naive"), rounds=2)
    assert "MORE than once in 2 of 2 rounds" in message
    assert "checked" not in message
    assert "Nothing records that an event was handled" in message
    assert "even copies sent one after another each did the effect" in message


def test_a_check_then_act_race_is_explained_as_a_race(idemlab, code, effects):
    message = failure_of(idemlab, hint(code, "check_then_act"), effects, make_event=events("race"), rounds=2)
    assert "each checked 'not done yet' before any of them recorded it" in message
    assert "copies sent one after another did it once" in message


def test_a_lost_effect_is_called_lost_with_the_crash_point(idemlab, code, effects):
    crash = Crash.before("hints.record")
    message = failure_of(
        idemlab, hint(code, "claim_first"), effects, make_event=events("lost"), rounds=2, together=False, crash=crash
    )
    assert "LOST in 2 of 2 rounds" in message
    assert "the copy exits before hints.record" in message
    assert "did it again" not in message and "LESS than once" not in message


def test_every_copy_failing_shows_the_error_and_no_idempotency_advice(idemlab, code, effects):
    message = failure_of(idemlab, hint(code, "missing_table"), effects, make_event=events("fail"), rounds=2)
    assert message.startswith("hints.missing_table: every copy failed in 2 of 2 rounds")
    assert "ResourceNotFoundException" in message and "hint-no-such-table" in message
    assert 'hints.py", line 41, in missing_table' in message and "site-packages" not in message
    assert "Powertools" not in message and "atomic" not in message and "conditional write" not in message


def test_a_handler_that_hangs_shows_its_timeout_uncut(idemlab, code, effects):
    message = failure_of(
        idemlab, hint(code, "hangs"), effects, make_event=events("hang"), rounds=1, copies=1, timeout=1
    )
    assert message.startswith("hints.hangs: every copy failed in 1 of 1 rounds")
    assert "Sandbox.Timedout" in message and "Task timed out after 1.00 seconds" in message
    assert "timeout=1" in message  # the setting that governs it
    assert "Powertools" not in message and "atomic" not in message


def test_powertools_doubling_after_a_timeout_explains_the_in_progress_expiry(idemlab, code, effects):
    crash = Crash.after("hints.record", how="timeout")
    # Each copy's clock starts with its invocation and holds Powertools' first calls (its
    # client is made then) and the record: 15 s leave a loaded runner room for them, and
    # the first copy waits them out only once.
    message = failure_of(
        idemlab,
        hint(code, "with_powertools"),
        effects,
        make_event=events("pt-timeout"),
        rounds=1,
        together=False,
        crash=crash,
        timeout=15,
    )
    assert "MORE than once in 1 of 1 rounds" in message
    assert "in-progress record" in message and "expires" in message
    assert "timeout=15" in message  # the function timeout governs when it expires
    assert "or Powertools' @idempotent" not in message


def test_a_passing_report_says_it_passed(idemlab, code, effects):
    report = idemlab.assert_exactly_once(hint(code, "naive"), events("once"), effects, rounds=2, copies=1)
    assert report.passed
    assert report.message().startswith("hints.naive: passed: the effect happened exactly once in each of 2 rounds")
    assert "not exactly once" not in report.message()


def test_a_copy_error_is_shown_uncut_with_the_handlers_own_file_and_line(idemlab, code, effects):
    message = failure_of(idemlab, hint(code, "refuses"), effects, make_event=events("refuse"), rounds=1)
    assert LONG_REASON in message
    assert 'hints.py", line 49, in refuses' in message
    assert "idemlab_testing_bootstrap" not in message


def test_an_import_error_names_the_users_module_file_and_line_first(idemlab, code, effects):
    with pytest.raises(DeliveryError) as failure:
        idemlab.deliver(Handler.module("broken.handler", code_root=code), {"id": "broken"})
    message = str(failure.value)
    assert message.startswith("the handler 'broken.handler' could not load: ModuleNotFoundError")
    assert 'broken.py", line 4, in <module>' in message
    assert "idemlab_testing_bootstrap" not in message


def test_a_missing_table_on_the_counting_side_names_the_table_and_the_count_function(idemlab, code, effects):
    import boto3

    def count_missing(event):
        return boto3.resource("dynamodb").Table("hint-counting-table").scan()["Count"]

    with pytest.raises(testing.EffectCountError) as failure:
        idemlab.assert_exactly_once(hint(code, "naive"), events("count"), count_missing, rounds=1)
    message = str(failure.value)
    assert "count_missing" in message and "'hint-counting-table'" in message and "ResourceNotFoundException" in message
    assert "round 0" in message


CLAIM_OR_RAISE = """
import os

import boto3

effects = boto3.resource("dynamodb").Table(os.environ["EFFECTS_TABLE"])


def handler(event, context):
    # The copy that loses the claim raises instead of answering "already done".
    effects.put_item(Item={"pk": f"claim#{event['id']}", "id": event["id"]}, ConditionExpression="attribute_not_exists(pk)")
    return "claimed"
"""


def test_copies_that_failed_in_a_passing_run_are_reported_as_a_warning(idemlab, tmp_path, effects):
    (tmp_path / "claim_or_raise.py").write_text(textwrap.dedent(CLAIM_OR_RAISE))
    handler = Handler.module("claim_or_raise.handler", code_root=tmp_path)
    with pytest.warns(testing.CopiesFailedWarning) as caught:
        report = idemlab.assert_exactly_once(handler, events("loser"), effects, rounds=2, together=False)
    assert report.passed
    text = str(caught[0].message)
    assert text.startswith("claim_or_raise.handler: passed: the effect happened exactly once in each of 2 rounds")
    assert "2 copies failed with an error of their own" in text and "ConditionalCheckFailedException" in text
