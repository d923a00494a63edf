"""Two effects counted by name, and mistakes caught in the test process before anything deploys."""

from __future__ import annotations

import textwrap

import pytest

from idemlab import testing
from idemlab.testing import DuplicateEffectError, Handler, HandlerError

SIGNUP = """
import os

import boto3

effects = boto3.resource("dynamodb").Table(os.environ["EFFECTS_TABLE"])


def grant_bonus(event):
    # One conditional write per user: a second copy cannot grant it again.
    try:
        effects.put_item(Item={"pk": f"bonus#{event['user']}", "user": event["user"], "kind": "bonus"},
                         ConditionExpression="attribute_not_exists(pk)")
    except effects.meta.client.exceptions.ConditionalCheckFailedException:
        return False
    return True


def send_email(event, copy):
    effects.put_item(Item={"pk": f"email#{event['user']}#{copy}", "user": event["user"], "kind": "email"})


def email_every_copy(event, context):
    grant_bonus(event)
    send_email(event, context.aws_request_id)  # every copy mails again


def email_with_the_bonus(event, context):
    if grant_bonus(event):
        send_email(event, "first")
"""


@pytest.fixture(scope="module")
def code(tmp_path_factory):
    root = tmp_path_factory.mktemp("signup-code")
    (root / "signup.py").write_text(textwrap.dedent(SIGNUP))
    return root


@pytest.fixture
def effects(idemlab):
    table = idemlab.make_table("signup-effects")
    idemlab.environment["EFFECTS_TABLE"] = table.name

    def count(event) -> dict[str, int]:
        items = [item for item in table.scan(ConsistentRead=True)["Items"] if item["user"] == event["user"]]
        return {kind: sum(1 for item in items if item["kind"] == kind) for kind in ("bonus", "email")}

    return count


def users(number: int) -> dict:
    return {"user": f"user-{number}"}


def test_named_counts_fail_naming_the_effect_that_was_not_once(idemlab, code, effects):
    handler = Handler.module("signup.email_every_copy", code_root=code)
    with pytest.raises(DuplicateEffectError) as failure:
        idemlab.assert_exactly_once(handler, users, effects, rounds=2, together=False)
    message = str(failure.value)
    assert "bonus: 1 time:    2 rounds  ok" in message
    assert "email: 2 times:    2 rounds  WRONG" in message
    assert "effect counted bonus 1 time, email 2 times" in message
    assert failure.value.report.doubled() == [0, 1]


def test_named_counts_pass_when_each_effect_happened_once(idemlab, code, effects):
    handler = Handler.module("signup.email_with_the_bonus", code_root=code)
    report = idemlab.assert_exactly_once(handler, users, effects, rounds=3)
    assert [r.count for r in report.rounds] == [{"bonus": 1, "email": 1}] * 3


@pytest.mark.parametrize("returned", [{}, {"bonus": 1, "email": "1"}, {"bonus": 1.5}, "1"])
def test_a_count_that_is_not_a_whole_number_or_a_mapping_of_them_is_refused_by_name(idemlab, code, effects, returned):
    def count_badly(event):
        return returned

    handler = Handler.module("signup.email_with_the_bonus", code_root=code)
    with pytest.raises(testing.EffectCountError, match=r"count_effect .*count_badly returned"):
        idemlab.assert_exactly_once(handler, users, count_badly, rounds=1)


def test_a_misspelt_handler_function_fails_before_anything_deploys(idemlab, code):
    before = idemlab.client("lambda").list_functions()["Functions"]
    with pytest.raises(
        HandlerError, match=r"signup.py defines no 'email_evry_copy' \(its functions: email_every_copy,"
    ):
        idemlab.deliver(Handler.module("signup.email_evry_copy", code_root=code), users(0))
    with pytest.raises(HandlerError, match="defines no 'email_evry_copy'"):
        Handler.module("signup.email_evry_copy", code_root=code)
    assert idemlab.client("lambda").list_functions()["Functions"] == before


def test_a_handler_module_that_does_not_parse_fails_with_its_file_and_line(tmp_path):
    (tmp_path / "typo.py").write_text("def handler(event, context)\n    return 1\n")
    with pytest.raises(HandlerError, match=r"typo.py, line 1: expected ':'"):
        Handler.module("typo.handler", code_root=tmp_path)


def test_an_unknown_keyword_argument_is_refused_by_assert_exactly_once_itself(idemlab, code, effects):
    before = idemlab.client("lambda").list_functions()["Functions"]
    with pytest.raises(TypeError, match=r"assert_exactly_once\(\) got an unexpected keyword argument 'timout'"):
        idemlab.assert_exactly_once(
            Handler.module("signup.email_with_the_bonus", code_root=code), users, effects, timout=3
        )
    assert idemlab.client("lambda").list_functions()["Functions"] == before
