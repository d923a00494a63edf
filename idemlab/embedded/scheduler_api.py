"""EventBridge Scheduler's API refuses what AWS refuses.

moto stores any Scheduler schedule expression, and answers a duplicate schedule name with
HTTP 400. AWS answers:

- a malformed expression, on CreateSchedule and UpdateSchedule, with 400
  ValidationException "Invalid Schedule Expression <expression>." (the wording AWS
  answered in the recordings of LocalStack's tests/aws/services/scheduler/test_scheduler.py,
  v4.14.0: `at(2021-12-31)`, `at(2021-12-31T23:59:59Z)`, `rate(10 seconds)` and others);
  the forms accepted are in schedule_expressions.py;
- a duplicate name with 409 ConflictException (Scheduler API reference, CreateSchedule).

Schedules are stored, not fired: the lab's scheduler firer fires them
(idemlab/background/scheduler_firer.py).
"""

from __future__ import annotations

import json

from idemlab.embedded.patching import wrap
from idemlab.embedded.schedule_expressions import valid_schedule_expression


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
