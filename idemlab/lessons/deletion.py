"""Lessons 3 and 4 plumbing (notebooks 03 and 04): a client of the deployed account-deletion workflow.

The lesson's own calls (the claim, the fenced write) stay in the notebooks; this module holds
what they would repeat: seeding a user, counting what is left, executions, races, pictures.
"""

from __future__ import annotations

import contextlib
import datetime
import functools
import json
import operator
import time
import uuid
from collections import Counter

from boto3.dynamodb.conditions import Attr, Key

from idemlab import clients, faults, lambda_code, lessons, progress, settings
from idemlab.barrier import all_at_once
from idemlab.lessons import queue_depth  # noqa: F401 (notebook 04 reads its DLQ's depth)

FUNCTION_DIR = settings.ROOT / "functions" / "deletion"
# Claim invocations released together in notebook 03's race on the deployed function: one
# execution each (the workshop's quota check reads this lesson's peak from here).
CLAIM_RACE_WORKERS = 4

# A module of the deletion Lambda code (``"erasure.state"``, ``"claim_deletion"``).
import_function_module = functools.partial(lambda_code.load, FUNCTION_DIR)


def outbox_items(outbox, **equal) -> list[dict]:
    """Every item of the email outbox (a boto3 Table) whose attributes equal ``equal``."""
    condition = functools.reduce(operator.and_, (Attr(name).eq(value) for name, value in equal.items()))
    return lessons.scan(outbox.name, outbox.meta.client, FilterExpression=condition)


def new_request_item(stack: dict, user_id: str | None = None, due_at: int = 0) -> str:
    """A SCHEDULED request straight in the table (no schedule, so nothing fires later):
    for stories and races, which start or claim it themselves. Due at ``due_at`` (epoch
    seconds): the claim refuses it before then."""
    request_id = f"del-story-{uuid.uuid4().hex[:10]}"
    requests = lessons.table(stack, "deletion_requests")
    import_function_module("erasure.state").create(
        requests, request_id, user_id or f"user-{uuid.uuid4().hex[:6]}", due_at
    )
    return request_id


def wait_until_due(due_at: int, timeout: float = 60) -> None:
    """Return once the clock has reached ``due_at``: the claim refuses a request before it."""
    lessons.poll(lambda: time.time() >= due_at, timeout, every=0.2, what=f"the due time {due_at}")


class Deletions(lessons.Deployment):
    """The deployed deletion workflow, its functions and the tables it deletes from."""

    def __init__(self, stack: dict):
        super().__init__(stack)
        self.s3 = clients.client("s3")
        self.sfn = clients.client("stepfunctions")
        self.bucket = stack["buckets"]["user_files"]
        self.state_machine_arn = stack["state_machines"]["account_deletion"]
        self.dead_letter_queue = stack["queues"]["deletion_dlq"]

    def seed_user(self, user_id: str, records: int = 3, files: int = 2) -> None:
        """Give ``user_id`` some records, files and an identity, for a deletion to remove."""
        with self.table("user_records").batch_writer() as batch:
            for n in range(records):
                batch.put_item(Item={"user_id": user_id, "record_id": f"r{n:04d}", "body": f"record {n} of {user_id}"})
        self.table("identities").put_item(Item={"user_id": user_id, "email": f"{user_id}@example.com"})
        for n in range(files):
            self.s3.put_object(
                Bucket=self.bucket, Key=f"{user_id}/file-{n}.txt", Body=f"file {n} of {user_id}".encode()
            )

    def leftovers(self, user_id: str) -> dict[str, int]:
        """What is left of ``user_id``: records, files and identities (all 0 once deleted)."""
        by_user = {"KeyConditionExpression": Key("user_id").eq(user_id), "ConsistentRead": True, "Select": "COUNT"}
        records = self.table("user_records").query(**by_user)["Count"]
        identity = self.table("identities").get_item(Key={"user_id": user_id}, ConsistentRead=True)
        files = self.s3.list_objects_v2(Bucket=self.bucket, Prefix=f"{user_id}/").get("KeyCount", 0)
        return {"records": records, "files": files, "identities": int("Item" in identity)}

    def goodbyes(self, user_id: str) -> int:
        """Goodbye emails sent to ``user_id`` (the outbox stands for the mail service)."""
        return len(outbox_items(self.table("email_outbox"), user_id=user_id, kind="goodbye"))

    def request(self, deletion_request_id: str):
        """The stored request (``erasure.state.Request``)."""
        return import_function_module("erasure.state").read(self.table("deletion_requests"), deletion_request_id)

    def request_status(self, deletion_request_id: str) -> str:
        return self.request(deletion_request_id).status.value

    def steps_done(self, deletion_request_id: str) -> list[str]:
        return sorted(self.request(deletion_request_id).steps_done)

    def the_schedule(self, deletion_request_id: str) -> dict:
        name = import_function_module("request_deletion").schedule_name(deletion_request_id)
        return clients.client("scheduler").get_schedule(Name=name, GroupName=self.stack["schedule_group"])

    def arm_fault(self, step: str, point: str, deletion_request_id: str, kind: str, times: int = 1) -> str:
        """Make the next ``times`` workers reaching ``step`` at ``point`` (``erasure.faults.POINTS``)
        for this request fail the ``kind`` way; the fault's key, for ``disarm_fault``.
        ValueError for a point, kind or count that is not one: nothing is armed then."""
        boundaries = import_function_module("erasure.faults")
        if point not in boundaries.POINTS:
            raise ValueError(f"fault point must be one of {', '.join(boundaries.POINTS)}, not {point!r}")
        return faults.arm(self.table("faults"), boundaries.at(step, point), deletion_request_id, kind, times)

    def disarm_fault(self, fault_key: str) -> None:
        """Take an armed fault away: the cause of the failures is fixed."""
        faults.disarm(self.table("faults"), fault_key)

    def start(self, deletion_request_id: str, execution_name: str | None = None) -> str:
        """Start the workflow for a request, named like the schedule names it unless told."""
        event = json.dumps({"deletion_request_id": deletion_request_id})
        name = execution_name or deletion_request_id
        return self.sfn.start_execution(stateMachineArn=self.state_machine_arn, name=name, input=event)["executionArn"]

    def executions_of(self, name_prefix: str) -> list[dict]:
        """Executions whose name starts with ``name_prefix`` (a request id), oldest first."""
        pages = self.sfn.get_paginator("list_executions").paginate(stateMachineArn=self.state_machine_arn)
        found = [e for page in pages for e in page["executions"] if e["name"].startswith(name_prefix)]
        return sorted(found, key=lambda e: e["startDate"])

    def run_until_failed(self, deletion_request_id: str, max_attempts: int = 3) -> list[str]:
        """Start attempts until the request is FAILED, as the sweeper would restart it after
        each failure (without waiting for its retry delay), under the sweeper's execution
        names; the end states of the attempts."""
        name = deletion_request_id
        ends = []
        for restart in range(1, max_attempts + 1):
            execution = wait_for(self.start(deletion_request_id, name))
            stored = self.request(deletion_request_id)
            ends.append(f"{execution['status']} -> request {stored.status.value}")
            if stored.status != "RETRYABLE":
                break
            name = import_function_module("sweeper").execution_name(stored, restart)
        return ends

    def claim_race_deployed(self, workers: int = CLAIM_RACE_WORKERS, rounds: int = 10) -> dict[str, dict]:
        """``workers`` invocations of the deployed ``claim_deletion`` function for the same
        request at once, ``rounds`` times: the claim runs where it runs in production, in
        the function, not in this process. Outcomes counted, and the winners per round."""

        def claims(request_id: str) -> list:
            events = [{"deletion_request_id": request_id, "owner": f"worker-{i}"} for i in range(workers)]
            return [lambda event=event: self.invoke("claim_deletion", event)["outcome"] for event in events]

        per_round = self._races(rounds, claims)
        return {
            "outcomes": dict(Counter(outcome for outcomes in per_round for outcome in outcomes)),
            "winners_per_round": dict(Counter(outcomes.count("claimed") for outcomes in per_round)),
        }

    def cancel_race(self, rounds: int = 20) -> dict[str, int]:
        """A cancel and a claim on the same SCHEDULED request at the same moment, ``rounds`` times."""
        state = import_function_module("erasure.state")
        claims = import_function_module("erasure.claims")
        tables = [self.table("deletion_requests") for _ in range(2)]

        # The cancel is the user's own: it names the user the request deletes.
        def cancel_and_claim(request_id: str) -> list:
            user = self.request(request_id).user_id  # read before the race, not inside it
            return [
                lambda: state.cancel(tables[0], request_id, user)[0],
                lambda: claims.claim(tables[1], request_id, "the schedule", 60).claim is not None,
            ]

        per_round = self._races(rounds, cancel_and_claim)
        winners = [
            [name for name, won in zip(("cancel", "claim"), answers, strict=True) if won] for answers in per_round
        ]
        return dict(Counter(names[0] if len(names) == 1 else f"{len(names)} winners" for names in winners))

    def _races(self, rounds: int, calls_for) -> list[list]:
        """Each round: a fresh SCHEDULED request, ``calls_for(its id)`` run at once; their answers."""
        answers = []
        with progress.Stage("racing calls on fresh deletion requests", rounds, "rounds") as stage:
            for _ in range(rounds):
                answers.append(all_at_once(calls_for(new_request_item(self.stack))))
                stage.advance()
        return answers

    def sweeper_alarms(self) -> dict[str, dict]:
        """The two alarms on the sweeper: one for stuck requests (its metric), one for a sweeper
        that stopped sweeping (its Lambda errors). What each watches, and how it treats missing data."""
        cloudwatch = clients.client("cloudwatch")
        names = [self.stack["alarms"][key] for key in ("stuck_processing", "sweeper_stopped")]
        shown = (
            "MetricName",
            "Statistic",
            "Period",
            "EvaluationPeriods",
            "ComparisonOperator",
            "Threshold",
            "TreatMissingData",
        )
        return {
            alarm["AlarmName"]: {key: alarm[key] for key in shown}
            for alarm in cloudwatch.describe_alarms(AlarmNames=names)["MetricAlarms"]
        }

    def alarm_state(self, key: str) -> dict:
        """The state of one of the stack's alarms (``"deletion_dlq"``, ``"sweeper_stopped"``),
        its reason and when it last changed."""
        name = self.stack["alarms"][key]
        alarm = clients.client("cloudwatch").describe_alarms(AlarmNames=[name])["MetricAlarms"][0]
        return {"alarm": name, **{field: alarm[field] for field in ("StateValue", "StateReason")}}

    def wait_for_alarm(self, key: str, state: str, seconds: float) -> dict:
        """Wait until the alarm is in ``state`` (ALARM, OK, INSUFFICIENT_DATA); its state.
        A TimeoutError names the state it was last seen in."""
        return lessons.poll(
            lambda: self.alarm_state(key),
            seconds,
            1.0,
            until=lambda seen: seen["StateValue"] == state,
            what=f"alarm {key} in {state}",
        )

    def stuck_metric(self, minutes: int = 15, wait_seconds: float = 0) -> dict:
        """What the stuck-requests alarm watches, and the values the sweeper published to it
        (waiting up to ``wait_seconds`` for the first one: CloudWatch may be slow to show a
        new metric)."""
        cloudwatch = clients.client("cloudwatch")
        alarm = cloudwatch.describe_alarms(AlarmNames=[self.stack["alarms"]["stuck_processing"]])["MetricAlarms"][0]
        metric = {name: alarm[name] for name in ("Namespace", "MetricName", "Dimensions")}

        def points() -> list[dict]:
            now = datetime.datetime.now(datetime.timezone.utc)
            minute = datetime.timedelta(minutes=1)
            window = {"StartTime": now - minutes * minute, "EndTime": now + minute}
            return cloudwatch.get_metric_statistics(**metric, **window, Period=60, Statistics=["Maximum"])["Datapoints"]

        shown = "the sweeper's first point of the stuck-requests metric (CloudWatch may be slow to show a new one)"
        found = sorted(lessons.poll(points, wait_seconds, every=10, shown=shown), key=lambda p: p["Timestamp"])
        return {
            "metric": f"{alarm['Namespace']}/{alarm['MetricName']}",
            "dimensions": alarm["Dimensions"],
            "maximum per minute": [p["Maximum"] for p in found],
        }

    def clean_up(self, request_ids) -> list[str]:
        """Leave nothing scheduled behind: cancel each request still SCHEDULED (which deletes
        its schedule) and delete any schedule left for the others. The schedules of these
        requests that still exist afterwards (none, unless something refused)."""
        scheduler = clients.client("scheduler")
        group = self.stack["schedule_group"]
        left = []
        for request_id in request_ids:
            stored = self.request(request_id)
            if stored.status.value == "SCHEDULED":
                self.invoke("cancel_deletion", {"deletion_request_id": request_id, "user_id": stored.user_id})
            name = import_function_module("request_deletion").schedule_name(request_id)
            with contextlib.suppress(scheduler.exceptions.ResourceNotFoundException):
                scheduler.delete_schedule(Name=name, GroupName=group)
            left += [name] if scheduler.list_schedules(GroupName=group, NamePrefix=name)["Schedules"] else []
        return left


def wait_for(execution_arn: str, timeout: float = 120) -> dict:
    """The execution once it stopped running."""
    return clients.wait_for_execution(execution_arn, timeout, poll_seconds=0.2)


def _history(execution_arn: str) -> list[dict]:
    history = clients.client("stepfunctions").get_execution_history(executionArn=execution_arn, maxResults=1000)
    return sorted(history["events"], key=lambda e: e["id"])


def last_state(execution_arn: str) -> str:
    """The last state an execution entered: how it ended (AlreadyDone, Complete, ...)."""
    entered = [e["stateEnteredEventDetails"] for e in _history(execution_arn) if e.get("stateEnteredEventDetails")]
    return entered[-1]["name"] if entered else "?"


def task_attempts(execution_arn: str) -> list[tuple[str, str]]:
    """(state, what happened) for every Lambda attempt of an execution, in order."""
    current = None
    attempts = []
    for event in _history(execution_arn):
        if event.get("stateEnteredEventDetails"):
            current = event["stateEnteredEventDetails"]["name"]
        elif event["type"] == "LambdaFunctionSucceeded":
            attempts.append((current, "succeeded"))
        elif event["type"] in ("LambdaFunctionFailed", "LambdaFunctionTimedOut"):
            details = (
                event.get("lambdaFunctionFailedEventDetails") or event.get("lambdaFunctionTimedOutEventDetails") or {}
            )
            attempts.append((current, f"failed: {details.get('error', event['type'])}"))
    return attempts


class Timeline:
    """What happened to one request, per worker, on one clock: for the pictures."""

    def __init__(self):
        self.events = []  # (time, worker, label, accepted: True, False or None for a note)
        self.leases = []

    def event(self, t: float, worker: str, label: str, accepted: bool | None) -> None:
        self.events.append((t, worker, label, accepted))

    def lease(self, worker: str, start: float, end: float, token: int) -> None:
        self.leases.append((worker, start, end, token))

    def draw(self, title: str = "", ax=None):
        workers = list(dict.fromkeys([w for _, w, _, _ in self.events] + [w for w, *_ in self.leases]))
        meaning = "(green: write accepted by DynamoDB, red: refused, grey: what the worker does)"
        ax, row = lessons.draw_lanes(self.events, f"seconds   {meaning}", title, ax, workers, lane_inches=1.5, width=11)
        for worker, start, end, token in self.leases:
            ax.broken_barh([(start, end - start)], (row[worker] - 0.12, 0.24), color="#e4e4e4", edgecolor="#aaaaaa")
            ax.annotate(
                f"lease (token {token})",
                (end, row[worker]),
                fontsize="x-small",
                color="#777777",
                ha="right",
                va="center",
            )
        return ax


def draw_attempts(attempts: list[tuple[str, str]], title: str = "", ax=None):
    """One row per workflow state; a green dot per successful attempt, a red cross per failure."""
    marks = [
        (n, state, "" if what == "succeeded" else what.removeprefix("failed: "), what == "succeeded")
        for n, (state, what) in enumerate(attempts)
    ]
    return lessons.draw_lanes(marks, "Lambda attempts, in order", title, ax)[0]
