"""CloudWatch metric alarms change state on the embedded backend, and SQS reports its depth.

moto stores metric alarms and answers DescribeAlarms, but never evaluates one: an alarm
keeps the state it was created in, whatever its metric does. LocalStack evaluates each
metric alarm on a schedule (`services/cloudwatch/alarm_scheduler.py`, v4.14.0), and its
SQS provider publishes each queue's `ApproximateNumberOfMessagesVisible` and
`ApproximateNumberOfMessagesNotVisible` to `AWS/SQS` (`CloudwatchPublishWorker` in
`services/sqs/provider.py`). So the embedded backend does both, in passes a quarter of the
shortest alarm period apart (between `PASS_SECONDS` and `LONGEST_PASS_SECONDS`):

- `publish_queue_depths`: for every queue an alarm watches, the two SQS metrics above, with
  the dimension `QueueName`, as AWS/SQS reports them (SQS developer guide, "Available CloudWatch
  metrics for Amazon SQS").
- `publish_lambda_metrics`: for every function an alarm watches, the invocation metrics
  `Invocations` (1 per invocation) and `Errors` (1 when it ended in a function error, else 0),
  with the dimension `FunctionName`, stamped with the time the invocation started, as Lambda
  publishes them (Lambda developer guide, "Types of metrics for Lambda functions",
  monitoring-metrics-types.html). The Lambda service records every invocation's outcome in an
  `InvocationOutcomes`; each pass takes them all, so the outcomes of functions nobody watches
  are dropped, never kept.
- `evaluate`: every alarm on one metric (no metric math, no anomaly band) is evaluated
  over its last `EvaluationPeriods` periods, ending now: a period's value is the alarm's
  statistic over that period; it breaches when the comparison with the threshold holds.
  The alarm goes to ALARM when at least `DatapointsToAlarm` (default: all
  `EvaluationPeriods`) of them breach, to OK otherwise. A period with no data counts as
  `TreatMissingData` says: `breaching`, `notBreaching`, `ignore` (the state stays), or
  `missing` (the default: left out; no data in any period is INSUFFICIENT_DATA).
  CloudWatch user guide, "Evaluating an alarm" and "Configuring how CloudWatch alarms
  treat missing data" (AlarmThatSendsEmail.html, alarms-and-missing-data.html).

What differs from AWS: the pass runs several times a period rather than once, so an
alarm moves within seconds of its window saying so (the same compressed time as the lab's other
schedules); alarm actions are not carried out and no history is kept (moto has no
DescribeAlarmHistory): the state, its reason and its time are what DescribeAlarms shows.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

PASS_SECONDS = 5.0  # how often the server looks at the alarms
# How often a pass publishes and evaluates: a quarter of the shortest period an alarm has
# (four data points in every period), at least every PASS_SECONDS and at most every
# LONGEST_PASS_SECONDS. The lab's alarms have periods of one and five minutes: every 15 s.
# Each pass is some thirty requests to the backend itself, most of what an idle stack costs it.
LONGEST_PASS_SECONDS = 15.0
# Data points in one PutMetricData call (CloudWatch API reference, PutMetricData: up to 1,000).
METRICS_PER_REQUEST = 500

QUEUE_METRICS = {
    "ApproximateNumberOfMessagesVisible": "ApproximateNumberOfMessages",
    "ApproximateNumberOfMessagesNotVisible": "ApproximateNumberOfMessagesNotVisible",
}

COMPARISONS = {
    "GreaterThanThreshold": lambda value, threshold: value > threshold,
    "GreaterThanOrEqualToThreshold": lambda value, threshold: value >= threshold,
    "LessThanThreshold": lambda value, threshold: value < threshold,
    "LessThanOrEqualToThreshold": lambda value, threshold: value <= threshold,
}


def state_for(values: list[float | None], alarm: dict) -> str | None:
    """The state the alarm's last periods call for (oldest first; None: no data in that
    period), or None when the alarm keeps its state (`ignore` with data missing)."""
    breaches = COMPARISONS[alarm["ComparisonOperator"]]
    treat = alarm.get("TreatMissingData") or "missing"
    verdicts: list[bool] = []
    for value in values:
        if value is not None:
            verdicts.append(breaches(value, alarm["Threshold"]))
        elif treat == "breaching":
            verdicts.append(True)
        elif treat == "notBreaching":
            verdicts.append(False)
        elif treat == "ignore":
            return None
    if not verdicts:
        return "INSUFFICIENT_DATA"
    needed = alarm.get("DatapointsToAlarm") or alarm["EvaluationPeriods"]
    return "ALARM" if sum(verdicts) >= needed else "OK"


@dataclass(frozen=True)
class Outcome:
    """One invocation that ran, as Lambda's invocation metrics count it."""

    function_name: str
    region: str
    invoked_at: datetime  # when it started: Lambda stamps Errors with the invocation's time
    errored: bool  # it ended in a function error (FunctionError: a raise, a timeout, an exit)


class InvocationOutcomes:
    """Every invocation's outcome since the last pass, recorded by the Lambda service's threads."""

    def __init__(self):
        self._lock = threading.Lock()
        self._pending: list[Outcome] = []

    def record(self, outcome: Outcome) -> None:
        with self._lock:
            self._pending.append(outcome)

    def take(self) -> list[Outcome]:
        """All outcomes recorded since the last take, and none kept."""
        with self._lock:
            taken, self._pending = self._pending, []
        return taken


class AlarmEvaluator:
    """One pass per `run_once`: queue depths and watched functions' invocation metrics
    published, then every metric alarm evaluated."""

    def __init__(self, client_factory, region: str = "us-east-1", outcomes: InvocationOutcomes | None = None):
        self._cloudwatch = client_factory("cloudwatch", region)
        self._sqs = client_factory("sqs", region)
        self._region = region
        self._outcomes = outcomes or InvocationOutcomes()
        # A queue's URL is its name's for good (SQS builds it from the account and the name),
        # so a pass asks for it once, not on every pass: an idle stack's backend spent most of
        # its time on these passes (a dozen watched queues, every few seconds).
        self._queue_urls: dict[str, str] = {}
        self._last_full_pass: float | None = None  # time.monotonic() of the last publish and evaluate

    def due(self, alarms: list[dict], at: float) -> bool:
        """Whether this pass publishes and evaluates (see LONGEST_PASS_SECONDS)."""
        if not alarms:
            return False
        if self._last_full_pass is None:
            return True
        shortest = min(alarm["Period"] for alarm in alarms)
        cadence = min(LONGEST_PASS_SECONDS, max(PASS_SECONDS, shortest / 4))
        # Half a pass early counts: the timer that calls a pass drifts by a little each time.
        return at - self._last_full_pass >= cadence - PASS_SECONDS / 2

    def run_once(self, now: datetime | None = None) -> dict[str, str]:
        now = now or datetime.now(timezone.utc)
        pages = self._cloudwatch.get_paginator("describe_alarms").paginate(AlarmTypes=["MetricAlarm"])
        alarms = [alarm for alarm in pages.search("MetricAlarms[]") if _evaluated(alarm)]
        at = time.monotonic()
        if not self.due(alarms, at):
            if not alarms:
                self._outcomes.take()  # nobody watches any function: dropped, never kept
            return {}
        self._last_full_pass = at
        self.publish_queue_depths(_watched_queues(alarms), now)
        self.publish_lambda_metrics(_watched_functions(alarms))
        return self.evaluate(alarms, now)

    def publish_lambda_metrics(self, functions: set[str]) -> None:
        """AWS/Lambda Invocations and Errors of the watched functions' invocations since the last pass."""
        data = []
        for outcome in self._outcomes.take():
            if outcome.function_name not in functions or outcome.region != self._region:
                continue
            dimensions = [{"Name": "FunctionName", "Value": outcome.function_name}]
            for metric, value in (("Invocations", 1.0), ("Errors", 1.0 if outcome.errored else 0.0)):
                data.append(
                    {
                        "MetricName": metric,
                        "Dimensions": dimensions,
                        "Timestamp": outcome.invoked_at,
                        "Value": value,
                        "Unit": "Count",
                    }
                )
        self._put_metric_data("AWS/Lambda", data)

    def publish_queue_depths(self, queues: set[str], now: datetime) -> None:
        """The AWS/SQS depth metrics of the named queues (those an alarm watches: a queue
        nobody watches costs the server nothing)."""
        data = []
        for name in sorted(queues):
            try:
                if name not in self._queue_urls:
                    self._queue_urls[name] = self._sqs.get_queue_url(QueueName=name)["QueueUrl"]
                attributes = self._sqs.get_queue_attributes(
                    QueueUrl=self._queue_urls[name], AttributeNames=list(QUEUE_METRICS.values())
                )
            except self._sqs.exceptions.QueueDoesNotExist:
                self._queue_urls.pop(name, None)
                continue  # an alarm may outlive its queue
            depth = attributes.get("Attributes", {})
            data += [
                {
                    "MetricName": metric,
                    "Dimensions": [{"Name": "QueueName", "Value": name}],
                    "Timestamp": now,
                    "Value": float(depth.get(attribute, 0)),
                    "Unit": "Count",
                }
                for metric, attribute in QUEUE_METRICS.items()
            ]
        self._put_metric_data("AWS/SQS", data)

    def _put_metric_data(self, namespace: str, data: list[dict]) -> None:
        for start in range(0, len(data), METRICS_PER_REQUEST):
            self._cloudwatch.put_metric_data(Namespace=namespace, MetricData=data[start : start + METRICS_PER_REQUEST])

    def evaluate(self, alarms: list[dict], now: datetime) -> dict[str, str]:
        """Each alarm whose state changed in this pass, with its new state."""
        changed = {}
        for alarm in alarms:
            state = state_for(self._values(alarm, now), alarm)
            if state is None or state == alarm["StateValue"]:
                continue
            self._cloudwatch.set_alarm_state(
                AlarmName=alarm["AlarmName"],
                StateValue=state,
                StateReason=f"{_reason(alarm, state)} (evaluated by the embedded backend)",
                StateReasonData=json.dumps({"version": "1.0", "evaluatedAt": now.isoformat()}),
            )
            changed[alarm["AlarmName"]] = state
        return changed

    def _values(self, alarm: dict, now: datetime) -> list[float | None]:
        """The alarm's statistic in each of its last EvaluationPeriods periods, oldest first."""
        period = timedelta(seconds=alarm["Period"])
        values = []
        for back in range(alarm["EvaluationPeriods"], 0, -1):
            start = now - back * period
            answer = self._cloudwatch.get_metric_statistics(
                Namespace=alarm["Namespace"],
                MetricName=alarm["MetricName"],
                Dimensions=alarm.get("Dimensions", []),
                StartTime=start,
                EndTime=start + period,
                Period=alarm["Period"],
                Statistics=[alarm["Statistic"]],
            )
            points = answer.get("Datapoints", [])
            values.append(float(points[0][alarm["Statistic"]]) if points else None)
        return values


def _evaluated(alarm: dict) -> bool:
    """An alarm on one metric with a plain statistic; metric math, anomaly bands and
    extended statistics (percentiles) are not evaluated here."""
    return not alarm.get("Metrics") and alarm["ComparisonOperator"] in COMPARISONS and bool(alarm.get("Statistic"))


def _watched_queues(alarms: list[dict]) -> set[str]:
    return {
        dimension["Value"]
        for alarm in alarms
        if alarm.get("Namespace") == "AWS/SQS"
        for dimension in alarm.get("Dimensions", [])
        if dimension["Name"] == "QueueName"
    }


def _watched_functions(alarms: list[dict]) -> set[str]:
    return {
        dimension["Value"]
        for alarm in alarms
        if alarm.get("Namespace") == "AWS/Lambda"
        for dimension in alarm.get("Dimensions", [])
        if dimension["Name"] == "FunctionName"
    }


def _reason(alarm: dict, state: str) -> str:
    if state == "INSUFFICIENT_DATA":
        return "Insufficient Data: no datapoint in the evaluation range"
    crossed = "crossed" if state == "ALARM" else "not crossed"
    comparison = f"{alarm['ComparisonOperator']} {alarm['Threshold']}"
    return f"Threshold {crossed}: {comparison} over {alarm['EvaluationPeriods']} period(s)"
