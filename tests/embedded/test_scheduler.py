"""EventBridge Scheduler on the embedded backend refuses what AWS refuses."""

import uuid

import pytest

from idemlab import clients

TARGET = {
    "Arn": "arn:aws:lambda:us-east-1:123456789012:function:anything",
    "RoleArn": "arn:aws:iam::123456789012:role/scheduler",
}

# Each was answered with ValidationException by AWS (recorded in LocalStack's
# tests/aws/services/scheduler/test_scheduler.py, v4.14.0), or breaks a rule of the
# Scheduler user guide's "Schedule types" page.
REFUSED = [
    "at(2021-12-31)",
    "at(2021-12-31T23:59:59Z)",
    "at(2021-02-30T10:00:00)",
    "rate(10 seconds)",
    "rate(10 years)",
    "rate(10)",
    "rate(-10 minutes)",
    "rate( 10 minutes )",
    " rate(10 minutes)",
    "rate(1 minutes)",
    "rate(5 minute)",
    "cron(0 1 * * * *)",
    "cron(7 20 * * NOT *)",
    "cron(71 8 1 * ? *)",
    "cron(0 12 * * ?)",
    "cron()",
]
ACCEPTED = [
    "at(2031-12-31T23:59:59)",
    "rate(1 minute)",
    "rate(5 minutes)",
    "rate(2 days)",
    "cron(0-15/1 8-8 ? * 2,3,4,5,6,7 *)",
    "cron(0 18 ? * MON-FRI *)",
    "cron(*/15 * * * ? *)",
    "cron(0 10 L * ? 2030)",
]


def create(name: str, expression: str):
    return clients.client("scheduler").create_schedule(
        Name=name, ScheduleExpression=expression, FlexibleTimeWindow={"Mode": "OFF"}, Target=TARGET
    )


@pytest.mark.parametrize("expression", REFUSED)
def test_malformed_schedule_expression_is_refused_on_create(backend, expression):
    scheduler = clients.client("scheduler")
    name = f"s-{uuid.uuid4().hex[:8]}"
    with pytest.raises(scheduler.exceptions.ValidationException) as refused:
        create(name, expression)
    assert refused.value.response["Error"]["Message"] == f"Invalid Schedule Expression {expression}."
    with pytest.raises(scheduler.exceptions.ResourceNotFoundException):
        scheduler.get_schedule(Name=name)


@pytest.mark.parametrize("expression", ACCEPTED)
def test_well_formed_schedule_expressions_are_accepted(backend, expression):
    scheduler = clients.client("scheduler")
    name = f"s-{uuid.uuid4().hex[:8]}"
    created = create(name, expression)
    assert created["ResponseMetadata"]["HTTPStatusCode"] == 200
    stored = scheduler.get_schedule(Name=name)
    assert (stored["Name"], stored["ScheduleExpression"]) == (name, expression)


def test_malformed_schedule_expression_is_refused_on_update_and_nothing_changes(backend):
    scheduler = clients.client("scheduler")
    name = f"s-{uuid.uuid4().hex[:8]}"
    create(name, "at(2031-01-01T00:00:00)")
    with pytest.raises(scheduler.exceptions.ValidationException):
        scheduler.update_schedule(
            Name=name, ScheduleExpression="at(2031-01-01T00:00:00Z)", FlexibleTimeWindow={"Mode": "OFF"}, Target=TARGET
        )
    assert scheduler.get_schedule(Name=name)["ScheduleExpression"] == "at(2031-01-01T00:00:00)"


def test_duplicate_schedule_name_is_a_409_conflict(backend):
    scheduler = clients.client("scheduler")
    name = f"s-{uuid.uuid4().hex[:8]}"
    create(name, "rate(5 minutes)")
    with pytest.raises(scheduler.exceptions.ConflictException) as refused:
        create(name, "rate(5 minutes)")
    assert refused.value.response["ResponseMetadata"]["HTTPStatusCode"] == 409
