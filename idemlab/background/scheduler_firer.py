"""Fire EventBridge Scheduler one-time schedules on backends that only store them.

Neither LocalStack community nor moto ever fires a schedule (LocalStack's Scheduler docs,
"Current limitations": https://docs.localstack.cloud/aws/services/scheduler/; its 4.14.0
provider, localstack-core/localstack/services/scheduler/provider.py, is moto's
moto/scheduler/models.py, which only stores schedules). This
process does, against any endpoint, through the public Scheduler API only: it lists
the schedules, and for each ``at()`` schedule that is due it delivers the target's
input, retries by the schedule's RetryPolicy, sends what cannot be delivered to the
schedule's dead-letter queue, and deletes the schedule when ActionAfterCompletion
says DELETE.

``python -m idemlab.background.scheduler_firer`` runs it in a loop (``make up`` starts
it); tests and notebooks call ``run_once`` or the ``fire_now``/``fire_twice``/``fire_late``
helpers.
"""

from __future__ import annotations

import argparse
import datetime
import json
import re
import signal
import sys
import time
import uuid
from dataclasses import dataclass, field
from zoneinfo import ZoneInfo

from botocore.exceptions import BotoCoreError, ClientError

from idemlab import clients
from idemlab.background.targets import DeliveryFailed, deliver

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

_AT = re.compile(r"^at\((\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})\)$")

DELIVERED = "delivered"
RETRY_LATER = "retry_later"
DEAD_LETTERED = "dead_lettered"
DROPPED = "dropped"  # failed for good, and no dead-letter queue took it
PASS_FAILED = "pass_failed"  # the firer could not finish this schedule; the next pass retries


@dataclass
class Firing:
    """What happened to one due schedule in one pass."""

    group: str
    name: str
    outcome: str
    attempt: int
    detail: str = ""


@dataclass
class _Pending:
    attempts: int = 0
    next_try: float = 0.0


def due_time(schedule: dict) -> float | None:
    """Epoch seconds at which an ``at()`` schedule is due; None for rate/cron schedules."""
    match = _AT.match(schedule.get("ScheduleExpression", ""))
    if not match:
        return None
    zone = ZoneInfo(schedule.get("ScheduleExpressionTimezone") or "UTC")
    moment = datetime.datetime.strptime(match.group(1), "%Y-%m-%dT%H:%M:%S").replace(tzinfo=zone)
    return moment.timestamp()


@dataclass
class SchedulerFirer:
    """Fires due one-time schedules; keeps each event's retry count between passes."""

    endpoint_url: str | None = None
    groups: tuple[str, ...] | None = None  # only these schedule groups; None: every group
    pending: dict[tuple[str, str], _Pending] = field(default_factory=dict)
    _clients: dict = field(default_factory=dict, repr=False)

    def _scheduler(self):
        # One client for the firer's life: it asks every second, and a client is costly to make.
        if "scheduler" not in self._clients:
            self._clients["scheduler"] = clients.client("scheduler", self.endpoint_url)
        return self._clients["scheduler"]

    def run_once(self, now: float | None = None) -> list[Firing]:
        """One pass: fire (or retry) every due one-time schedule; what happened to each."""
        now = time.time() if now is None else now
        firings = []
        for group, name in self._enabled_schedules():
            schedule = self._get(group, name)
            if schedule is None:
                continue
            due = due_time(schedule)
            if due is None or due > now:
                continue
            if self.pending.get((group, name), _Pending()).next_try > now:
                continue
            try:
                firings.append(self._fire(schedule, due, now))
            except (ClientError, BotoCoreError) as exc:
                # One schedule's trouble (its queue gone, the backend restarting) must not
                # keep the others from firing.
                firings.append(Firing(group, name, PASS_FAILED, self.pending.get((group, name), _Pending()).attempts, str(exc)))
        return firings

    def fire_now(self, name: str, group: str = "default") -> Firing:
        """Fire a schedule at once, whatever its time says (the notebook's 'fire now')."""
        now = time.time()
        return self._fire(self._require(group, name), now, now)

    def fire_twice(self, name: str, group: str = "default") -> list[Firing]:
        """Deliver the same event twice before completing: Scheduler delivers at least
        once, so a target must cope with this."""
        schedule = self._require(group, name)
        now = time.time()
        first = self._attempt(schedule, now, now, complete=False)
        return [first, self._fire(schedule, now, now)]

    def fire_late(self, name: str, group: str = "default", seconds_late: float = 0) -> Firing:
        """Fire as if the firer had been down until ``seconds_late`` after the due time;
        past MaximumEventAgeInSeconds the event goes to the dead-letter queue instead."""
        schedule = self._require(group, name)
        due = due_time(schedule) or time.time()
        return self._fire(schedule, due, due + seconds_late)

    # -- one event ---------------------------------------------------------------

    def _fire(self, schedule: dict, due: float, now: float) -> Firing:
        return self._attempt(schedule, due, now, complete=True)

    def _attempt(self, schedule: dict, due: float, now: float, complete: bool) -> Firing:
        group, name = schedule["GroupName"], schedule["Name"]
        target = schedule["Target"]
        policy = target.get("RetryPolicy") or {}
        max_retries = policy.get("MaximumRetryAttempts", DEFAULT_MAX_RETRY_ATTEMPTS)
        max_age = policy.get("MaximumEventAgeInSeconds", DEFAULT_MAX_EVENT_AGE_SECONDS)
        state = self.pending.setdefault((group, name), _Pending())
        attempt = state.attempts + 1
        if now - due > max_age:
            failure = DeliveryFailed("AWS.Scheduler.EventAgeExceeded", f"event older than {max_age} s", False)
        else:
            try:
                answer = deliver(target["Arn"], target.get("Input"), self.endpoint_url)
            except DeliveryFailed as exc:
                failure = exc
            else:
                if complete:
                    self._complete(schedule)
                return Firing(group, name, DELIVERED, attempt, json.dumps(answer, default=str))
        if failure.retryable and attempt <= max_retries:
            state.attempts = attempt
            state.next_try = now + min(FIRST_RETRY_SECONDS * 2 ** (attempt - 1), MAX_RETRY_SECONDS)
            return Firing(group, name, RETRY_LATER, attempt, str(failure))
        outcome = self._dead_letter(schedule, failure, attempt)
        self._complete(schedule)
        return Firing(group, name, outcome, attempt, str(failure))

    def _dead_letter(self, schedule: dict, failure: DeliveryFailed, attempt: int) -> str:
        target = schedule["Target"]
        dlq_arn = (target.get("DeadLetterConfig") or {}).get("Arn")
        if not dlq_arn:
            print(f"scheduler-firer: {schedule['Name']} failed for good and has no dead-letter queue: {failure}", file=sys.stderr)
            return DROPPED
        _, _, _, _, account, queue_name = dlq_arn.split(":", 5)
        sqs = clients.client("sqs", self.endpoint_url)
        try:
            url = sqs.get_queue_url(QueueName=queue_name, QueueOwnerAWSAccountId=account)["QueueUrl"]
        except ClientError as exc:
            print(f"scheduler-firer: {schedule['Name']} failed for good and its dead-letter queue is unusable ({exc}): {failure}", file=sys.stderr)
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
        sqs.send_message(
            QueueUrl=url,
            MessageBody=target.get("Input") or "{}",
            MessageAttributes={k: {"DataType": "String", "StringValue": v} for k, v in attributes.items() if v},
        )
        return DEAD_LETTERED

    def _complete(self, schedule: dict) -> None:
        group, name = schedule["GroupName"], schedule["Name"]
        self.pending.pop((group, name), None)
        if schedule.get("ActionAfterCompletion") == "DELETE":
            try:
                self._scheduler().delete_schedule(Name=name, GroupName=group)
            except ClientError as exc:
                if exc.response["Error"]["Code"] != "ResourceNotFoundException":
                    raise
            return
        # Kept (ActionAfterCompletion=NONE): a one-time schedule fires once, so it is
        # disabled, which a restarted firer sees too; AWS keeps it silent the same way.
        update = {k: schedule[k] for k in ("Name", "GroupName", "ScheduleExpression", "FlexibleTimeWindow", "Target") if k in schedule}
        for optional in ("ScheduleExpressionTimezone", "ActionAfterCompletion", "Description", "StartDate", "EndDate", "KmsKeyArn"):
            if schedule.get(optional):
                update[optional] = schedule[optional]
        self._scheduler().update_schedule(**update, State="DISABLED")

    # -- reading schedules ---------------------------------------------------------

    def _enabled_schedules(self) -> list[tuple[str, str]]:
        found, token = [], None
        while True:
            page = self._scheduler().list_schedules(State="ENABLED", **({"NextToken": token} if token else {}))
            found.extend((s["GroupName"], s["Name"]) for s in page.get("Schedules", []) if not self.groups or s["GroupName"] in self.groups)
            token = page.get("NextToken")
            if not token:
                return found

    def _get(self, group: str, name: str) -> dict | None:
        try:
            schedule = self._scheduler().get_schedule(Name=name, GroupName=group)
        except ClientError as exc:
            if exc.response["Error"]["Code"] == "ResourceNotFoundException":
                return None  # deleted since the listing
            raise
        schedule.setdefault("GroupName", group)
        return schedule

    def _require(self, group: str, name: str) -> dict:
        schedule = self._get(group, name)
        if schedule is None:
            raise LookupError(f"no schedule {name!r} in group {group!r}")
        return schedule


_default: SchedulerFirer | None = None


def default_firer() -> SchedulerFirer:
    """The process's firer, so retry counts carry over from one pass to the next."""
    global _default
    if _default is None:
        _default = SchedulerFirer()
    return _default


def run_once(now: float | None = None) -> list[Firing]:
    return default_firer().run_once(now)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m idemlab.background.scheduler_firer", description=__doc__.split("\n\n")[0])
    parser.add_argument("--interval", type=float, default=POLL_SECONDS, help="seconds between passes")
    parser.add_argument("--once", action="store_true", help="one pass, then exit")
    parser.add_argument("--group", action="append", help="only this schedule group (repeatable); default: every group")
    args = parser.parse_args(argv)
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    firer = SchedulerFirer(groups=tuple(args.group)) if args.group else default_firer()
    print(f"scheduler-firer: watching schedules every {args.interval} s", file=sys.stderr, flush=True)
    try:
        while not stopping:
            try:
                for firing in firer.run_once():
                    print(f"scheduler-firer: {firing.group}/{firing.name} {firing.outcome} (attempt {firing.attempt}) {firing.detail}", file=sys.stderr, flush=True)
            except (ClientError, BotoCoreError, OSError) as exc:
                # The backend may be restarting; the next pass tries again.
                print(f"scheduler-firer: pass failed: {exc}", file=sys.stderr, flush=True)
            if args.once:
                break
            time.sleep(args.interval)
    except KeyboardInterrupt:
        pass
    print("scheduler-firer: stopped", file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
