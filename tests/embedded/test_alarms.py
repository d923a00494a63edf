"""Metric alarms move on the embedded backend, as on AWS and LocalStack: a queue's depth
is published to AWS/SQS, and an alarm goes to ALARM when its metric crosses the threshold,
back to OK when it no longer does, as its TreatMissingData says for periods with no data.
Before, moto kept every alarm in the state it was created in."""

from __future__ import annotations

import json
import uuid
from datetime import datetime, timedelta, timezone

import boto3
import pytest

from idemlab import clients, lessons, module_spec
from idemlab.embedded.alarm_evaluator import (
    LONGEST_PASS_SECONDS,
    PASS_SECONDS,
    AlarmEvaluator,
    InvocationOutcomes,
    Outcome,
    state_for,
)
from idemlab.embedded.server import EmbeddedBackend

WAIT = 60  # passes run every few seconds; generous for a loaded machine


def _alarm(**fields) -> dict:
    return {"ComparisonOperator": "GreaterThanThreshold", "Threshold": 0.0, "EvaluationPeriods": 1, **fields}


@pytest.mark.parametrize(
    "values, fields, state",
    [
        ([1.0], {}, "ALARM"),
        ([0.0], {}, "OK"),
        ([None], {}, "INSUFFICIENT_DATA"),
        ([None], {"TreatMissingData": "notBreaching"}, "OK"),
        ([None], {"TreatMissingData": "breaching"}, "ALARM"),
        ([None], {"TreatMissingData": "ignore"}, None),
        ([1.0, 0.0, 1.0], {"EvaluationPeriods": 3}, "OK"),  # all three must breach by default
        ([1.0, 0.0, 1.0], {"EvaluationPeriods": 3, "DatapointsToAlarm": 2}, "ALARM"),
        (
            [None, None, None],
            {
                "EvaluationPeriods": 3,
                "TreatMissingData": "breaching",
                "ComparisonOperator": "LessThanThreshold",
                "Threshold": 1.0,
            },
            "ALARM",
        ),
    ],
)
def test_the_state_an_alarm_calls_for(values, fields, state):
    assert state_for(values, _alarm(**fields)) == state


def _state(cloudwatch, name: str) -> str:
    return cloudwatch.describe_alarms(AlarmNames=[name])["MetricAlarms"][0]["StateValue"]


def test_a_queue_alarm_goes_to_alarm_with_a_message_and_back_to_ok_without(backend):
    sqs, cloudwatch = clients.client("sqs"), clients.client("cloudwatch")
    queue = f"alarmed-{uuid.uuid4().hex[:8]}"
    url = sqs.create_queue(QueueName=queue)["QueueUrl"]
    name = f"{queue}-not-empty"
    cloudwatch.put_metric_alarm(
        AlarmName=name,
        Namespace="AWS/SQS",
        MetricName="ApproximateNumberOfMessagesVisible",
        Dimensions=[{"Name": "QueueName", "Value": queue}],
        Statistic="Maximum",
        Period=10,
        EvaluationPeriods=1,
        ComparisonOperator="GreaterThanThreshold",
        Threshold=0,
        TreatMissingData="notBreaching",
    )
    sqs.send_message(QueueUrl=url, MessageBody="a dead letter")
    lessons.poll(lambda: _state(cloudwatch, name), WAIT, 0.5, until=lambda s: s == "ALARM", what=f"{name} in ALARM")
    sqs.purge_queue(QueueUrl=url)
    # Back to OK once a whole period has passed with the queue empty.
    lessons.poll(lambda: _state(cloudwatch, name), WAIT, 0.5, until=lambda s: s == "OK", what=f"{name} back to OK")
    reason = cloudwatch.describe_alarms(AlarmNames=[name])["MetricAlarms"][0]["StateReason"]
    assert "Threshold not crossed" in reason


# Issue 37, item 6: the sweeper_stopped alarm was `breaching` on missing data over the
# sweeper's own metric, so a new stack (no sweep yet) went to ALARM and paged once per
# deploy. It now watches the sweeper's Lambda errors with missing data not breaching.
COMPRESSED_PERIOD = 10  # seconds for the module's 300: the same alarm in compressed time
FAILING_SWEEPER = """
def handler(event, context):
    if event.get("fail"):
        raise RuntimeError("the sweep failed before it published")
    return {"swept": 0}
"""


def module_alarm(key: str, function_name: str, period: int) -> dict:
    """The module's alarm ``key`` as PutMetricAlarm arguments, every field read from the module
    (module_spec), with the dimension pointed at ``function_name`` and the period compressed."""
    spec = module_spec.resources("aws_cloudwatch_metric_alarm")[key]
    alarm = {
        "AlarmName": f"{function_name}-{key}",
        "Namespace": spec["namespace"],
        "MetricName": spec["metric_name"],
        "Dimensions": [{"Name": name, "Value": function_name} for name in spec["dimensions"]],
        "Statistic": spec["statistic"],
        "Period": period,
        "EvaluationPeriods": spec["evaluation_periods"],
        "ComparisonOperator": spec["comparison_operator"],
        "Threshold": float(spec["threshold"]),
        "TreatMissingData": spec["treat_missing_data"],
    }
    if "datapoints_to_alarm" in spec:
        alarm["DatapointsToAlarm"] = spec["datapoints_to_alarm"]
    return alarm


def test_the_sweeper_alarm_stays_ok_on_a_new_stack_and_goes_off_when_the_sweeper_fails(backend, make_function):
    cloudwatch, lambda_ = clients.client("cloudwatch"), clients.client("lambda")
    sweeper = make_function(FAILING_SWEEPER)
    stopped = module_alarm("sweeper_stopped", sweeper, COMPRESSED_PERIOD)
    cloudwatch.put_metric_alarm(**stopped)
    # A witness created after it, on a metric nobody publishes, breaching when missing: once
    # the evaluator moved it, a pass has evaluated the sweeper's alarm too (one pass walks
    # every alarm; the witness was created second).
    witness = f"{sweeper}-witness"
    cloudwatch.put_metric_alarm(
        **{**stopped, "AlarmName": witness, "MetricName": "NeverPublished", "TreatMissingData": "breaching"}
    )
    lessons.poll(lambda: _state(cloudwatch, witness), WAIT, 0.5, until=lambda s: s == "ALARM", what=f"{witness}")
    assert _state(cloudwatch, stopped["AlarmName"]) == "OK"  # a new stack, no sweep yet: no page
    # Sweeps that run cleanly publish Errors of 0: still OK.
    lambda_.invoke(FunctionName=sweeper, Payload=b"{}")
    # The sweeper stops: every run fails. Runs keep coming on its schedule (here one a
    # second), so each compressed period holds errors, until the alarm goes off.
    seen = []

    def run_failing_and_read() -> str:
        answer = lambda_.invoke(FunctionName=sweeper, Payload=json.dumps({"fail": True}).encode())
        assert answer.get("FunctionError") == "Unhandled"
        seen.append(_state(cloudwatch, stopped["AlarmName"]))
        return seen[-1]

    lessons.poll(run_failing_and_read, WAIT * 3, 1.0, until=lambda s: s == "ALARM", what="sweeper_stopped in ALARM")
    errors = cloudwatch.get_metric_statistics(
        Namespace="AWS/Lambda",
        MetricName="Errors",
        Dimensions=[{"Name": "FunctionName", "Value": sweeper}],
        StartTime=datetime.now(timezone.utc) - timedelta(minutes=5),
        EndTime=datetime.now(timezone.utc) + timedelta(minutes=1),
        Period=300,
        Statistics=["Sum", "SampleCount"],
    )["Datapoints"]
    failed, published = sum(p["Sum"] for p in errors), sum(p["SampleCount"] for p in errors)
    assert failed >= 3 and published > failed  # one value per run: the clean run's 0 too


@pytest.mark.parametrize(
    "periods, seconds_since, due",
    [
        ([60, 300], None, True),  # the first pass publishes and evaluates
        ([60, 300], PASS_SECONDS, False),  # the lab's alarms: a quarter of a minute apart
        ([60, 300], 2 * PASS_SECONDS, False),
        ([60, 300], LONGEST_PASS_SECONDS, True),
        ([300], LONGEST_PASS_SECONDS, True),  # never further apart than that
        ([10, 300], PASS_SECONDS, True),  # a 10 s period: every pass
        ([], LONGEST_PASS_SECONDS, False),  # nothing to publish or evaluate
    ],
)
def test_a_pass_publishes_and_evaluates_four_times_in_the_shortest_period(periods, seconds_since, due):
    evaluator = AlarmEvaluator(lambda service, region: None)
    if seconds_since is not None:
        evaluator._last_full_pass = 1000.0
    alarms = [_alarm(Period=period) for period in periods]
    assert evaluator.due(alarms, 1000.0 + (seconds_since or 0)) is due


def test_with_no_alarm_a_pass_still_drops_the_invocation_outcomes():
    """Outcomes of functions nobody watches are dropped at every pass, never kept: a backend
    with no alarm at all (a plugin's, say) must not hold one per invocation for good."""
    with EmbeddedBackend() as server:
        session = boto3.session.Session(aws_access_key_id="test", aws_secret_access_key="test")
        outcomes = InvocationOutcomes()
        evaluator = AlarmEvaluator(
            lambda service, region: session.client(service, endpoint_url=server.url, region_name=region),
            outcomes=outcomes,
        )
        outcomes.record(Outcome("unwatched", "us-east-1", datetime.now(timezone.utc), errored=False))
        assert evaluator.run_once() == {}
        assert outcomes.take() == []
