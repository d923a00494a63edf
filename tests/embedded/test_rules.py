"""Scheduled EventBridge rules fire on the embedded backend, as they do on AWS."""

import time
import uuid

import pytest

from idemlab import clients
from idemlab.embedded.rule_scheduler import RuleScheduler
from idemlab.embedded.schedule_expressions import rate_seconds


def test_rate_expressions_are_read_in_seconds():
    assert rate_seconds("rate(1 minute)") == 60
    assert rate_seconds("rate(5 minutes)") == 300
    assert rate_seconds("rate(2 hours)") == 7200
    assert rate_seconds("cron(0 12 * * ? *)") is None
    assert rate_seconds("rate(0 minutes)") is None, "AWS refuses a rate of zero; it must not fire every pass"


@pytest.mark.timeout(180)
def test_rate_rule_invokes_its_lambda_target_once_per_period(make_function, table):
    function = make_function(
        """
        import boto3, json, os
        def handler(event, context):
            boto3.client("dynamodb").put_item(TableName=os.environ["TABLE"], Item={"pk": {"S": event["id"]}, "type": {"S": event["detail-type"]}})
        """,
        environment={"TABLE": table},
    )
    events = clients.client("events")
    rule = f"every-minute-{uuid.uuid4().hex[:6]}"
    events.put_rule(Name=rule, ScheduleExpression="rate(1 minute)", State="ENABLED")
    arn = clients.client("lambda").get_function(FunctionName=function)["Configuration"]["FunctionArn"]
    events.put_targets(Rule=rule, Targets=[{"Id": "fn", "Arn": arn}])

    scheduler = RuleScheduler(lambda service, region: clients.client(service))
    start = time.time()
    assert rule not in scheduler.run_once(now=start), "a rule first fires one period after it is seen"
    assert rule in scheduler.run_once(now=start + 61)
    assert rule not in scheduler.run_once(now=start + 62), "not again within the same period"

    # The target is invoked asynchronously: wait for its write (a cold start on a loaded
    # runner can take many seconds; the wait ends as soon as the write is there).
    deadline = time.monotonic() + 120
    items = []
    while not items and time.monotonic() < deadline:
        items = clients.client("dynamodb").scan(TableName=table)["Items"]
        time.sleep(0.2)
    assert [item["type"]["S"] for item in items] == ["Scheduled Event"], f"{function} wrote {items} within 120 s"
