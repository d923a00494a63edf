"""EventBridge Scheduler: a name is taken once, and only AWS's expression formats are accepted."""

import pytest
from botocore.exceptions import ClientError

# One-time schedules far enough ahead never to fire; disabled as well, to be sure.
VALID_AT = "at(2030-01-01T00:00:00)"


@pytest.fixture
def create_schedule(sandbox, role_arn, queue):
    scheduler = sandbox.client("scheduler")

    def create(name: str, expression: str) -> dict:
        # Registered first: a backend that wrongly accepts a bad expression must not leak it.
        sandbox.on_teardown(scheduler.delete_schedule, Name=name)
        return scheduler.create_schedule(
            Name=name,
            ScheduleExpression=expression,
            FlexibleTimeWindow={"Mode": "OFF"},
            State="DISABLED",
            Target={"Arn": queue["arn"], "RoleArn": role_arn, "Input": "{}"},
        )

    return create


def test_duplicate_schedule_name_is_a_409_conflict(sandbox, create_schedule, request):
    """CreateSchedule with the name of an existing schedule in the same group fails with
    ConflictException, HTTP status 409.

    https://docs.aws.amazon.com/scheduler/latest/APIReference/API_CreateSchedule.html (Errors)
    """
    name = sandbox.name("schedule")
    create_schedule(name, VALID_AT)

    with pytest.raises(ClientError) as duplicate:
        create_schedule(name, VALID_AT)

    assert duplicate.value.response["Error"]["Code"] == "ConflictException"
    if sandbox.backend == "localstack":
        # A known LocalStack 4.14.0 difference, kept visible rather than hidden: its Scheduler
        # is moto's backend, whose ScheduleExists error carries moto's default status 400
        # (moto/scheduler/exceptions.py), and LocalStack passes a moto error's status through
        # (localstack-core/localstack/services/moto.py, call_moto). The lessons read the code.
        request.node.add_marker(
            pytest.mark.xfail(strict=True, reason="LocalStack 4.14.0 answers ConflictException with HTTP 400")
        )
    assert duplicate.value.response["ResponseMetadata"]["HTTPStatusCode"] == 409


@pytest.mark.parametrize(
    "expression",
    [
        "at(2021-12-31)",  # a date without a time
        "at(2030-01-01T00:00:00Z)",  # a zone suffix: the zone goes in ScheduleExpressionTimezone
        "rate(10 seconds)",  # units are minute(s), hour(s) or day(s)
    ],
)
def test_malformed_schedule_expression_is_refused_and_creates_nothing(sandbox, create_schedule, expression):
    """A schedule expression is at(yyyy-mm-ddThh:mm:ss), rate(value unit) with unit
    minute(s) | hour(s) | day(s), or cron(fields); anything else fails with
    ValidationException (HTTP 400) and no schedule is created.

    https://docs.aws.amazon.com/scheduler/latest/APIReference/API_CreateSchedule.html (ScheduleExpression)
    https://docs.aws.amazon.com/scheduler/latest/UserGuide/schedule-types.html
    """
    scheduler = sandbox.client("scheduler")
    name = sandbox.name("schedule")

    with pytest.raises(ClientError) as refused:
        create_schedule(name, expression)

    assert refused.value.response["Error"]["Code"] == "ValidationException"
    assert refused.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
    with pytest.raises(ClientError) as missing:
        scheduler.get_schedule(Name=name)
    assert missing.value.response["Error"]["Code"] == "ResourceNotFoundException"
