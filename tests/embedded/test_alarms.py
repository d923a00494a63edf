"""Metric alarms move on the embedded backend, as on AWS and LocalStack: a queue's depth
is published to AWS/SQS, and an alarm goes to ALARM when its metric crosses the threshold,
back to OK when it no longer does, as its TreatMissingData says for periods with no data.
Before, moto kept every alarm in the state it was created in."""

from __future__ import annotations

import uuid

import pytest

from idemlab import clients, lessons
from idemlab.embedded.alarm_evaluator import state_for

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
