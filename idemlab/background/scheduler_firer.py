"""Fire EventBridge Scheduler one-time schedules on backends that only store them.

Neither LocalStack community nor moto ever fires a schedule (LocalStack's Scheduler docs,
"Current limitations": https://docs.localstack.cloud/aws/services/scheduler/; its 4.14.0
provider, localstack-core/localstack/services/scheduler/provider.py, is moto's
moto/scheduler/models.py, which only stores schedules). This process does, through the
public Scheduler API only: for each due ``at()`` schedule it delivers the target's input,
retries by the schedule's RetryPolicy, sends what cannot be delivered to the schedule's
dead-letter queue, and deletes the schedule when ActionAfterCompletion says DELETE.

``python -m idemlab.background.scheduler_firer`` runs it in a loop (``make up`` starts it),
and says "scheduler-firer: up" on stderr once it watches; SIGTERM ends it cleanly at any time.
"""

from __future__ import annotations

import signal

# A SIGTERM (`make down`, a test) may come while the imports below still run: Python's
# default for it kills the process with no "stopped" line and exit status -15. So, before
# anything slow, the handler is installed, and SIGTERM unblocked for a starter that blocks
# it across the spawn (the signal then waits, pending, until the handler is there).
STOPPING: list[bool] = []


def stop_on_sigterm() -> None:
    signal.signal(signal.SIGTERM, lambda *_: STOPPING.append(True))
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})


if __name__ == "__main__":
    stop_on_sigterm()

import argparse
import contextlib
import datetime
import functools
import json
import sys
import time
import uuid
from dataclasses import dataclass, field
from zoneinfo import ZoneInfo

from botocore.exceptions import BotoCoreError, ClientError

from idemlab import clients
from idemlab.background.targets import DeliveryFailed, deliver, queue_url

# How often the loop looks for due schedules. AWS fires a one-time schedule within a
# minute of its time; a second keeps workshop delays of a few seconds visible.
POLL_SECONDS = 1.0
# Scheduler's defaults when a schedule has no RetryPolicy (API_RetryPolicy).
DEFAULT_MAX_RETRY_ATTEMPTS = 185
DEFAULT_MAX_EVENT_AGE_SECONDS = 86400
# Backoff between retries of one event: doubling from 1 s, capped at a minute, so a
# workshop sees retries within seconds and an outage is not hammered.
FIRST_RETRY_SECONDS = 1
MAX_RETRY_SECONDS = 60

DELIVERED = "delivered"
RETRY_LATER = "retry_later"
DEAD_LETTERED = "dead_lettered"
DROPPED = "dropped"  # failed for good, and no dead-letter queue took it
PASS_FAILED = "pass_failed"  # the firer could not finish this schedule; the next pass retries


@dataclass(frozen=True)
class Firing:
    """What one pass did with one schedule."""

    group: str  # the schedule's group
    name: str  # the schedule's name
    outcome: str  # DELIVERED, RETRY_LATER, DEAD_LETTERED, DROPPED or PASS_FAILED
    attempt: int  # which delivery attempt of this event it was (1 for the first)
    detail: str = ""  # the target's answer (JSON) or why the delivery failed


def due_time(schedule: dict) -> float | None:
    """Epoch seconds at which an ``at()`` schedule is due; None for rate/cron schedules."""
    try:
        at = datetime.datetime.strptime(schedule.get("ScheduleExpression", ""), "at(%Y-%m-%dT%H:%M:%S)")
    except ValueError:
        return None
    return at.replace(tzinfo=ZoneInfo(schedule.get("ScheduleExpressionTimezone") or "UTC")).timestamp()


@dataclass
class SchedulerFirer:
    """Fires due one-time schedules; keeps each event's retry count between passes."""

    groups: tuple[str, ...] | None = None  # only these schedule groups; None: every group
    # (group, name) -> (attempts made, when the next may be made) of events being retried
    retrying: dict[tuple[str, str], tuple[int, float]] = field(default_factory=dict)
    # One client for the firer's life: it asks every second, and a client is costly to make.
    scheduler: object = field(default_factory=lambda: clients.client("scheduler"), repr=False)

    def run_once(self, now: float | None = None) -> list[Firing]:
        """One pass: fire (or retry) every due one-time schedule; what happened to each."""
        now = time.time() if now is None else now
        firings = []
        for listed in self.scheduler.get_paginator("list_schedules").paginate(State="ENABLED").search("Schedules[]"):
            group = listed["GroupName"]
            name = listed["Name"]
            if self.groups and group not in self.groups:
                continue
            schedule = self._get(group, name, required=False)
            if schedule is None:  # deleted since the listing
                continue
            due = due_time(schedule)
            attempts, next_try = self.retrying.get((group, name), (0, 0.0))
            if due is None or due > now or next_try > now:
                continue
            try:
                firings.append(self._attempt(schedule, due, now))
            except (ClientError, BotoCoreError) as exc:
                # One schedule's trouble (its queue gone, the backend restarting) must not stop the others.
                firings.append(Firing(group, name, PASS_FAILED, attempts, str(exc)))
        return firings

    def fire_twice(self, name: str, group: str = "default") -> list[Firing]:
        """Deliver the same event twice before completing: Scheduler delivers at least
        once, so a target must cope with this."""
        schedule = self._get(group, name)
        now = time.time()
        return [self._attempt(schedule, now, now, complete=False), self._attempt(schedule, now, now)]

    def fire_late(self, name: str, group: str = "default", seconds_late: float = 0) -> Firing:
        """Fire now, as if the firer had been down until ``seconds_late`` after the due time;
        past MaximumEventAgeInSeconds the event goes to the dead-letter queue instead."""
        schedule = self._get(group, name)
        due = due_time(schedule) or time.time()
        return self._attempt(schedule, due, due + seconds_late)

    fire_now = fire_late  # seconds_late=0: at once, whatever the schedule's time says

    def _get(self, group: str, name: str, required: bool = True) -> dict | None:
        try:
            return {"GroupName": group, **self.scheduler.get_schedule(Name=name, GroupName=group)}
        except self.scheduler.exceptions.ResourceNotFoundException:
            if required:
                raise LookupError(f"no schedule {name!r} in group {group!r}") from None
            return None  # deleted since the listing

    def _attempt(self, schedule: dict, due: float, now: float, complete: bool = True) -> Firing:
        """Deliver one event; retry later, dead-letter or complete the schedule, as its policy says."""
        group = schedule["GroupName"]
        name = schedule["Name"]
        target = schedule["Target"]
        policy = target.get("RetryPolicy") or {}
        max_age = policy.get("MaximumEventAgeInSeconds", DEFAULT_MAX_EVENT_AGE_SECONDS)
        attempt = self.retrying.get((group, name), (0, 0.0))[0] + 1
        try:
            if now - due > max_age:
                raise DeliveryFailed("AWS.Scheduler.EventAgeExceeded", f"event older than {max_age} s")
            answer = deliver(target["Arn"], target.get("Input"))
            outcome = DELIVERED
            detail = json.dumps(answer, default=str)
        except DeliveryFailed as failure:
            detail = str(failure)
            if failure.retryable and attempt <= policy.get("MaximumRetryAttempts", DEFAULT_MAX_RETRY_ATTEMPTS):
                backoff = min(FIRST_RETRY_SECONDS * 2 ** (attempt - 1), MAX_RETRY_SECONDS)
                self.retrying[(group, name)] = (attempt, now + backoff)
                return Firing(group, name, RETRY_LATER, attempt, detail)
            outcome = self._dead_letter(schedule, failure, attempt)
        if complete or outcome != DELIVERED:
            self.retrying.pop((group, name), None)
            if schedule.get("ActionAfterCompletion") == "DELETE":
                with contextlib.suppress(self.scheduler.exceptions.ResourceNotFoundException):
                    self.scheduler.delete_schedule(Name=name, GroupName=group)
            else:
                # Kept (ActionAfterCompletion=NONE): a one-time schedule fires once, so it is
                # disabled, which a restarted firer sees too; AWS keeps it silent the same way.
                # UpdateSchedule replaces the whole schedule, so all it accepts is given again.
                accepted = self.scheduler.meta.service_model.operation_model("UpdateSchedule").input_shape.members
                kept = {key: value for key, value in schedule.items() if key in accepted and value}
                self.scheduler.update_schedule(**{**kept, "State": "DISABLED"})
        return Firing(group, name, outcome, attempt, detail)

    def _dead_letter(self, schedule: dict, failure: DeliveryFailed, attempt: int) -> str:
        target = schedule["Target"]
        dlq_arn = (target.get("DeadLetterConfig") or {}).get("Arn")
        url = None
        why = "has no dead-letter queue"
        if dlq_arn:
            try:
                url = queue_url(dlq_arn)
            except ClientError as exc:
                why = f"its dead-letter queue is unusable ({exc})"
        if not url:
            print(f"scheduler-firer: {schedule['Name']} failed for good and {why}: {failure}", file=sys.stderr)
            return DROPPED
        # The attributes Scheduler puts on its dead-letter events (user guide,
        # configuring-schedule-dlq); the body is the input the target should have had.
        attributes = {
            "ERROR_CODE": failure.code,
            "ERROR_MESSAGE": failure.message or failure.code,
            "EXECUTION_ID": uuid.uuid4().hex,
            "RETRY_ATTEMPTS": str(attempt - 1),
            "SCHEDULE_ARN": schedule.get("Arn", ""),
            "TARGET_ARN": target["Arn"],
        }
        message_attributes = {
            name: {"DataType": "String", "StringValue": value} for name, value in attributes.items() if value
        }
        clients.client("sqs").send_message(
            QueueUrl=url,
            MessageBody=target.get("Input") or "{}",
            MessageAttributes=message_attributes,
        )
        return DEAD_LETTERED


def main(argv: list[str] | None = None) -> None:
    description = __doc__.split("\n\n")[0]
    parser = argparse.ArgumentParser(prog="python -m idemlab.background.scheduler_firer", description=description)
    parser.add_argument("--interval", type=float, default=POLL_SECONDS, help="seconds between passes")
    parser.add_argument("--once", action="store_true", help="one pass, then exit")
    parser.add_argument("--group", action="append", help="only this schedule group (repeatable); default: every group")
    args = parser.parse_args(argv)
    stop_on_sigterm()  # again, for a caller that runs main() itself
    firer = SchedulerFirer(groups=tuple(args.group) if args.group else None)
    log = functools.partial(print, "scheduler-firer:", file=sys.stderr, flush=True)
    log(f"up, watching schedules every {args.interval} s")  # what a starter waits for
    with contextlib.suppress(KeyboardInterrupt):
        while not STOPPING:
            try:
                for firing in firer.run_once():
                    log(f"{firing.group}/{firing.name} {firing.outcome} (attempt {firing.attempt}) {firing.detail}")
            except (ClientError, BotoCoreError, OSError) as exc:
                log(f"pass failed: {exc}")  # the backend may be restarting; the next pass tries again
            if args.once:
                break
            time.sleep(args.interval)
    log("stopped")


if __name__ == "__main__":
    main()
