"""Asynchronous invocation: Lambda's retries of a failed event, then the on-failure
destination, with the same per-round report (the embedded backend's async queue)."""

from __future__ import annotations

import textwrap

import pytest

from idemlab.testing import Crash, DuplicateEffectError, Handler

MAILER = """
import os
import uuid

import boto3

effects = boto3.resource("dynamodb").Table(os.environ["EFFECTS_TABLE"])


def send_email(event, attempt):
    effects.put_item(Item={"pk": f"email#{event['user']}#{attempt}", "user": event["user"]})


def mails_then_fails(event, context):
    send_email(event, context.aws_request_id + str(os.getpid()) + str(id(context)))
    raise RuntimeError("the audit log is down")


def mails_then_records(event, context):
    if "Item" in effects.get_item(Key={"pk": f"mailed#{event['user']}"}, ConsistentRead=True):
        return "already mailed"
    send_email(event, uuid.uuid4().hex)  # each call sends, as a real mail API would
    effects.put_item(Item={"pk": f"mailed#{event['user']}", "user": "-"})
    return "mailed"


def claims_mails_then_fails(event, context):
    try:
        effects.put_item(Item={"pk": f"claim#{event['user']}", "user": "-"}, ConditionExpression="attribute_not_exists(pk)")
    except effects.meta.client.exceptions.ConditionalCheckFailedException:
        return "already mailed"
    send_email(event, "once")
    raise RuntimeError("the audit log is down")
"""


@pytest.fixture(scope="module")
def code(tmp_path_factory):
    root = tmp_path_factory.mktemp("mailer-code")
    (root / "mailer.py").write_text(textwrap.dedent(MAILER))
    return root


@pytest.fixture
def emails(idemlab):
    table = idemlab.make_table("async-effects")
    idemlab.environment["EFFECTS_TABLE"] = table.name

    def count(event) -> int:
        return sum(1 for item in table.scan(ConsistentRead=True)["Items"] if item["user"] == event["user"])

    return count


def users(number: int) -> dict:
    return {"user": f"user-{number}"}


def test_a_handler_that_fails_after_its_effect_does_it_again_on_each_of_lambdas_retries(idemlab, code, emails):
    with pytest.raises(DuplicateEffectError) as failure:
        idemlab.assert_exactly_once(
            Handler.module("mailer.mails_then_fails", code_root=code),
            users,
            emails,
            rounds=1,
            copies=1,
            asynchronous=True,
        )
    message = str(failure.value)
    assert "3 times:    1 rounds  WRONG" in message  # the first attempt and Lambda's two retries
    assert "3 attempts, RetriesExhausted: failed: RuntimeError" in message
    assert "Lambda retried the event after the handler failed (up to 3 attempts)" in message
    assert "RuntimeError: the audit log is down" in message


def test_a_handler_that_claims_first_does_its_effect_once_across_the_retries(idemlab, code, emails):
    handler = Handler.module("mailer.claims_mails_then_fails", code_root=code)
    report = idemlab.assert_exactly_once(handler, users, emails, rounds=1, copies=2, asynchronous=True)
    copies = report.rounds[0].delivery.copies
    # The copy that claimed failed after mailing; its retry found the claim and succeeded.
    assert [copy.condition for copy in copies] == ["Success", "Success"]
    assert sorted(copy.attempts for copy in copies) == [1, 2]


def test_bad_async_options_are_refused(idemlab, code):
    with pytest.raises(ValueError, match="retries must be 0, 1 or 2"):
        idemlab.deliver_async(Handler.module("mailer.mails_then_fails", code_root=code), {"user": "x"}, retries=3)


def test_a_handler_that_dies_after_mailing_mails_again_on_lambdas_retry(idemlab, code, emails):
    handler = Handler.module("mailer.mails_then_records", code_root=code)
    crash = Crash.after("mailer.send_email")
    with pytest.raises(DuplicateEffectError) as failure:
        idemlab.assert_exactly_once(handler, users, emails, rounds=2, copies=1, asynchronous=True, crash=crash)
    report, message = failure.value.report, str(failure.value)
    assert report.doubled() == [0, 1]
    assert [copy.attempts for r in report.rounds for copy in r.delivery.copies] == [2, 2]  # the crash, then the retry
    assert (
        "CRASHED 1 time: the copy exits after mailer.send_email (Runtime.ExitError); Lambda retried the event."
        in message
    )
    assert "so Lambda retried the event (an asynchronous invoke is retried up to twice)" in message


def test_a_handler_that_claims_first_mails_once_when_it_dies_after_mailing(idemlab, code, emails):
    handler = Handler.module("mailer.claims_mails_then_fails", code_root=code)
    crash = Crash.after("mailer.send_email")
    report = idemlab.assert_exactly_once(handler, users, emails, rounds=1, copies=1, asynchronous=True, crash=crash)
    copy = report.rounds[0].delivery.copies[0]
    assert (copy.condition, copy.attempts, copy.result) == ("Success", 2, "already mailed")
    assert report.rounds[0].delivery.crashes == 1
