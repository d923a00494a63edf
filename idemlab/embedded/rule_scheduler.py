"""EventBridge rules with a `rate(...)` schedule fire on the embedded backend.

moto stores EventBridge rules that have a schedule expression but never fires them;
LocalStack does. The account-deletion sweeper runs from one (`rate(5 minutes)` unless the
Terraform module's `sweeper_schedule_expression` says otherwise), so the embedded backend
fires them too (RuleScheduler): every `rate(...)` rule, at its rate, to each Lambda target
(an asynchronous invoke, so the function's retries apply), with the target's `Input` or the
scheduled event. A rule's `cron(...)` is not evaluated here; none of the lab's rules uses one.
"""

from __future__ import annotations

import json
import sys
import time
import uuid
from datetime import datetime, timezone

from idemlab.embedded.schedule_expressions import rate_seconds

RULE_POLL_SECONDS = 1.0  # how often the server runs a RuleScheduler pass


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
        # The event EventBridge sends a scheduled rule's target (EventBridge user guide,
        # "Creating a rule that runs on a schedule").
        scheduled_event = {
            "version": "0",
            "id": str(uuid.uuid4()),
            "detail-type": "Scheduled Event",
            "source": "aws.events",
            "account": rule["Arn"].split(":")[4],
            "time": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "region": self._region,
            "resources": [rule["Arn"]],
            "detail": {},
        }
        for target in self._events.list_targets_by_rule(Rule=rule["Name"]).get("Targets", []):
            if ":lambda:" not in target["Arn"]:
                skipped = f"embedded: rule {rule['Name']}: target {target['Arn']} is not a Lambda function, skipped"
                print(skipped, file=sys.stderr)
                continue
            payload = target.get("Input") or json.dumps(scheduled_event)
            self._lambda.invoke(FunctionName=target["Arn"], InvocationType="Event", Payload=payload.encode())
