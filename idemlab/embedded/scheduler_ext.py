"""EventBridge schedules: Scheduler refuses what AWS refuses, and rules with a rate() schedule fire.

moto stores any Scheduler schedule expression, and answers a duplicate schedule name with
HTTP 400. AWS answers:

- a malformed expression, on CreateSchedule and UpdateSchedule, with 400
  ValidationException "Invalid Schedule Expression <expression>." (the wording AWS
  answered in the recordings of LocalStack's tests/aws/services/scheduler/test_scheduler.py,
  v4.14.0: `at(2021-12-31)`, `at(2021-12-31T23:59:59Z)`, `rate(10 seconds)` and others);
- a duplicate name with 409 ConflictException (Scheduler API reference, CreateSchedule).

The accepted forms are those of the Scheduler user guide, "Schedule types":
`at(yyyy-mm-ddThh:mm:ss)` (no zone suffix: the zone is ScheduleExpressionTimezone),
`rate(value unit)` with a positive whole value and a unit of minute(s), hour(s) or day(s),
singular exactly when the value is 1 (stated on the EventBridge "Rate expressions"
page), and `cron(...)` with six fields (minutes hours day-of-month month day-of-week
year) where exactly one of day-of-month and day-of-week is `?`.

moto also stores EventBridge rules that have a schedule expression but never fires them;
LocalStack does. The account-deletion sweeper runs from one (`rate(5 minutes)` unless the
Terraform module's `sweeper_schedule_expression` says otherwise), so the embedded backend
fires them too (RuleScheduler): every `rate(...)` rule, at its rate, to each Lambda target
(an asynchronous invoke, so the function's retries apply), with the target's `Input` or the
scheduled event. A rule's `cron(...)` is not evaluated here; none of the lab's rules uses one.
"""

from __future__ import annotations

import json
import re
import sys
import time
import uuid
from datetime import datetime, timezone

from idemlab.embedded.patching import wrap

_AT = re.compile(r"at\((\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})\)")
RATE = re.compile(r"rate\(([1-9][0-9]*) (minute|minutes|hour|hours|day|days)\)")
_UNIT_SECONDS = {"minute": 60, "hour": 3600, "day": 86400}
RULE_POLL_SECONDS = 1.0  # how often the server runs a RuleScheduler pass

_WEEKDAYS = "SUN|MON|TUE|WED|THU|FRI|SAT"
# Each cron field: its values (numbers may have leading zeros), then what it accepts
# besides values, ranges and steps: in the two day fields, `?` (the whole field), the
# last day L, the weekday nearest n nW, the last weekday dL and the nth weekday d#n.
_CRON_FIELDS = (
    (r"0*[1-5]?\d", None),  # minutes 0-59
    (r"0*(?:1?\d|2[0-3])", None),  # hours 0-23
    (r"0*(?:[1-9]|[12]\d|3[01])", r"L|LW|(?:[1-9]|[12]\d|3[01])W"),  # day of month 1-31
    (r"0*(?:[1-9]|1[0-2])|JAN|FEB|MAR|APR|MAY|JUN|JUL|AUG|SEP|OCT|NOV|DEC", None),  # month 1-12
    (rf"0*[1-7]|{_WEEKDAYS}", rf"L|(?:[1-7]|{_WEEKDAYS})(?:L|#[1-5])"),  # day of week 1-7
    (r"0*(?:19[7-9]\d|2[01]\d\d)", None),  # year 1970-2199
)


def _cron_field(values: str, special: str | None) -> str:
    """A comma list of `*`, values and ranges, each with an optional /step above zero; a
    day field (with specials) may be `?` instead, and is captured for the `?` rule."""
    item = rf"(?:\*|(?:{values})(?:-(?:{values}))?)(?:/0*[1-9]\d*)?"
    if special is None:
        return rf"(?:{item}(?:,{item})*)"
    return rf"(\?|(?:{special}|{item})(?:,(?:{special}|{item}))*)"


_CRON = re.compile(r"cron\(" + " ".join(_cron_field(*field) for field in _CRON_FIELDS) + r"\)")


def rate_seconds(expression: str) -> int | None:
    """The period of a `rate(...)` expression, in seconds; None for any other."""
    match = RATE.fullmatch(expression or "")
    return int(match.group(1)) * _UNIT_SECONDS[match.group(2).rstrip("s")] if match else None


def valid_schedule_expression(expression: str) -> bool:
    if match := _AT.fullmatch(expression):
        try:
            datetime(*(int(part) for part in match.groups()))
        except ValueError:
            return False
        return True
    if match := RATE.fullmatch(expression):
        return (match.group(1) == "1") == (not match.group(2).endswith("s"))
    if match := _CRON.fullmatch(expression):  # exactly one of the two day fields is `?`
        return (match.group(1) == "?") != (match.group(2) == "?")
    return False


def install() -> None:
    """Patch moto's Scheduler in this process; calling it again does nothing."""
    from moto.scheduler.exceptions import ScheduleExists, ValidationException
    from moto.scheduler.models import EventBridgeSchedulerBackend

    def validated(original, self, *args, **kwargs):
        expression = kwargs.get("schedule_expression")
        if expression is not None and not valid_schedule_expression(expression):
            raise ValidationException(f"Invalid Schedule Expression {expression}.")
        return original(self, *args, **kwargs)

    ScheduleExists.code = 409  # ConflictException, as AWS answers a duplicate name

    @wrap(ValidationException, "__init__")
    def with_message_member(original, self, message):
        """AWS's body carries the message as the exception's `Message` member, which botocore
        puts beside `Error` in the parsed response (the ValidationException shape of
        botocore's scheduler model; recorded in LocalStack's test_scheduler.snapshot.json, v4.14.0)."""
        original(self, message)
        self.description = json.dumps({"__type": self.error_type, "Message": message})
    for action in ("create_schedule", "update_schedule"):
        wrap(EventBridgeSchedulerBackend, action)(validated)


class RuleScheduler:
    """Fires the rate() rules that are due, one pass per `run_once`."""

    def __init__(self, client_factory, region: str = "us-east-1"):
        self._events = client_factory("events", region)
        self._lambda = client_factory("lambda", region)
        self._region = region
        self._next_due: dict[str, float] = {}

    def run_once(self, now: float | None = None) -> list[str]:
        now = time.time() if now is None else now
        fired = []
        for rule in self._events.get_paginator("list_rules").paginate().search("Rules[]"):
            period = rate_seconds(rule.get("ScheduleExpression", ""))
            if period is None or rule.get("State") != "ENABLED":
                continue
            # The first firing comes one period after the rule is first seen, as on AWS.
            due = self._next_due.setdefault(rule["Arn"], now + period)
            if now >= due:
                self._next_due[rule["Arn"]] = now + period
                self._fire(rule)
                fired.append(rule["Name"])
        return fired

    def _fire(self, rule: dict) -> None:
        scheduled_event = {
            "version": "0", "id": str(uuid.uuid4()), "detail-type": "Scheduled Event", "source": "aws.events",
            "account": rule["Arn"].split(":")[4], "time": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "region": self._region, "resources": [rule["Arn"]], "detail": {},
        }
        for target in self._events.list_targets_by_rule(Rule=rule["Name"]).get("Targets", []):
            if ":lambda:" not in target["Arn"]:
                skipped = f"embedded: rule {rule['Name']}: target {target['Arn']} is not a Lambda function, skipped"
                print(skipped, file=sys.stderr)
                continue
            payload = target.get("Input") or json.dumps(scheduled_event)
            self._lambda.invoke(FunctionName=target["Arn"], InvocationType="Event", Payload=payload.encode())
