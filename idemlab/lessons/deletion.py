"""Lesson 3 plumbing: the account-deletion code in-process, and its tables on a bare server.

Tests and the notebooks ``03_claims_and_leases`` and ``04_partial_failures_and_recovery``
import this module, so what a notebook shows is what CI checks.
"""

from __future__ import annotations

import datetime
import json
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from types import ModuleType

from boto3.dynamodb.conditions import Attr, Key

from idemlab import clients, functions, settings

FUNCTION_DIR = settings.ROOT / "functions" / "account_deletion"

# The table keys of the scenario (docs/DESIGN.md) and their key schema, as the Terraform
# module declares them; used to create private copies on a bare server.
TABLE_KEYS = ("deletion_requests", "user_records", "identities", "email_outbox", "faults")
_KEY_SCHEMA = {
    "deletion_requests": [("deletion_request_id", "S", "HASH")],
    "user_records": [("user_id", "S", "HASH"), ("record_id", "S", "RANGE")],
    "identities": [("user_id", "S", "HASH")],
    "email_outbox": [("idempotency_key", "S", "HASH")],
    "faults": [("fault_key", "S", "HASH")],
}


def import_function_module(name: str) -> ModuleType:
    """A module of the deletion Lambda code (``"deletion_state"``, ``"claim_deletion"``).

    Imported by the harness's one loader (``idemlab.functions.load``).
    """
    return functions.load(FUNCTION_DIR, name)


def create_tables(dynamodb_client, prefix: str | None = None) -> dict[str, str]:
    """Create the scenario's tables under a fresh prefix; returns {table key: table name}.

    Same keys and indexes as the Terraform module, so the code under test cannot tell
    the difference; the prefix keeps parallel tests apart on one server.
    """
    prefix = prefix or f"t{uuid.uuid4().hex[:8]}"
    names = {}
    for key in TABLE_KEYS:
        name = f"{prefix}-{key}"
        attributes = {n: t for n, t, _ in _KEY_SCHEMA[key]}
        spec = {
            "TableName": name,
            "BillingMode": "PAY_PER_REQUEST",
            "KeySchema": [{"AttributeName": n, "KeyType": k} for n, _, k in _KEY_SCHEMA[key]],
        }
        if key == "deletion_requests":
            attributes.update(user_id="S", status="S", lease_expires_at="N")
            spec["GlobalSecondaryIndexes"] = [
                _index("by_user", [("user_id", "HASH")]),
                _index("by_status_lease", [("status", "HASH"), ("lease_expires_at", "RANGE")]),
            ]
        spec["AttributeDefinitions"] = [{"AttributeName": n, "AttributeType": t} for n, t in attributes.items()]
        dynamodb_client.create_table(**spec)
        names[key] = name
    return names


def _index(name: str, keys: list[tuple[str, str]]) -> dict:
    return {
        "IndexName": name,
        "KeySchema": [{"AttributeName": n, "KeyType": k} for n, k in keys],
        "Projection": {"ProjectionType": "ALL"},
    }


def table_env(names: dict[str, str]) -> dict[str, str]:
    """The ``<KEY>_TABLE`` environment variables Terraform gives the functions."""
    return {f"{key.upper()}_TABLE": name for key, name in names.items()}


@dataclass
class Names:
    """Where the scenario lives: from the stack's ``lab`` output, or made by a test."""

    tables: dict[str, str]
    bucket: str
    schedule_group: str
    scheduler_role_arn: str
    scheduler_dlq_arn: str
    deletion_dlq_url: str
    state_machine_arn: str

    @classmethod
    def from_outputs(cls, lab: dict) -> "Names":
        return cls(
            tables={key: lab["tables"][key] for key in TABLE_KEYS},
            bucket=lab["buckets"]["user_files"],
            schedule_group=lab["schedule_group"],
            scheduler_role_arn=lab["scheduler_role_arn"],
            scheduler_dlq_arn=lab["queue_arns"]["scheduler_dlq"],
            deletion_dlq_url=lab["queues"]["deletion_dlq"],
            state_machine_arn=lab["state_machines"]["account_deletion"],
        )

    def function_env(self, **limits: int) -> dict[str, str]:
        """The environment Terraform gives the deletion functions (plus ``limits``, e.g.
        ``LEASE_SECONDS=5``), for running them in this process."""
        env = table_env(self.tables)
        env.update(
            USER_FILES_BUCKET=self.bucket,
            SCHEDULE_GROUP=self.schedule_group,
            SCHEDULER_ROLE_ARN=self.scheduler_role_arn,
            SCHEDULER_DLQ_ARN=self.scheduler_dlq_arn,
            DELETION_DLQ_QUEUE_URL=self.deletion_dlq_url,
            ACCOUNT_DELETION_STATE_MACHINE_ARN=self.state_machine_arn,
        )
        env.update({name: str(value) for name, value in limits.items()})
        return env


def create_private_scenario(state_machine_name: str | None = None) -> Names:
    """Everything the deletion functions need except the functions themselves, under a
    fresh prefix on the selected backend, for tests that run without the Terraform stack.

    The state machine is only named (its ARN is derived); the caller creates it.
    """
    prefix = f"t{uuid.uuid4().hex[:8]}"
    tables = create_tables(clients.client("dynamodb"), prefix)
    clients.client("s3").create_bucket(Bucket=f"{prefix}-user-files")
    sqs = clients.client("sqs")
    scheduler_dlq = sqs.create_queue(QueueName=f"{prefix}-scheduler_dlq")["QueueUrl"]
    deletion_dlq = sqs.create_queue(QueueName=f"{prefix}-deletion_dlq")["QueueUrl"]
    clients.client("scheduler").create_schedule_group(Name=f"{prefix}-deletions")
    account = clients.client("sts").get_caller_identity()["Account"]
    machine = state_machine_name or f"{prefix}-account_deletion"
    return Names(
        tables=tables,
        bucket=f"{prefix}-user-files",
        schedule_group=f"{prefix}-deletions",
        scheduler_role_arn=f"arn:aws:iam::{account}:role/{prefix}-scheduler",
        scheduler_dlq_arn=sqs.get_queue_attributes(QueueUrl=scheduler_dlq, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"],
        deletion_dlq_url=deletion_dlq,
        state_machine_arn=f"arn:aws:states:{settings.region()}:{account}:stateMachine:{machine}",
    )


def _dynamodb():
    return clients.resource("dynamodb")


def seed_user(names: Names, user_id: str, records: int = 3, files: int = 2) -> None:
    """Give ``user_id`` some records, files and an identity, for a deletion to remove."""
    dynamodb = _dynamodb()
    with dynamodb.Table(names.tables["user_records"]).batch_writer() as batch:
        for n in range(records):
            batch.put_item(Item={"user_id": user_id, "record_id": f"r{n:04d}", "body": f"record {n} of {user_id}"})
    dynamodb.Table(names.tables["identities"]).put_item(Item={"user_id": user_id, "email": f"{user_id}@example.com"})
    s3 = clients.client("s3")
    for n in range(files):
        s3.put_object(Bucket=names.bucket, Key=f"{user_id}/file-{n}.txt", Body=f"file {n} of {user_id}".encode())


def leftovers(names: Names, user_id: str) -> dict[str, int]:
    """What is left of ``user_id``: records, files and identities (all 0 once deleted)."""
    dynamodb = _dynamodb()
    records = dynamodb.Table(names.tables["user_records"]).query(
        KeyConditionExpression=Key("user_id").eq(user_id), ConsistentRead=True, Select="COUNT"
    )["Count"]
    identity = dynamodb.Table(names.tables["identities"]).get_item(Key={"user_id": user_id}, ConsistentRead=True)
    files = clients.client("s3").list_objects_v2(Bucket=names.bucket, Prefix=f"{user_id}/").get("KeyCount", 0)
    return {"records": records, "files": files, "identities": int("Item" in identity)}


def goodbyes(names: Names, user_id: str) -> int:
    """Goodbye emails sent to ``user_id`` (the outbox stands for the mail service)."""
    outbox = _dynamodb().Table(names.tables["email_outbox"])
    count, start = 0, None
    while True:
        page = outbox.scan(
            FilterExpression=Attr("user_id").eq(user_id) & Attr("kind").eq("goodbye"),
            Select="COUNT",
            ConsistentRead=True,
            **({"ExclusiveStartKey": start} if start else {}),
        )
        count += page["Count"]
        start = page.get("LastEvaluatedKey")
        if not start:
            return count


def request_status(names: Names, deletion_request_id: str) -> str:
    item = _dynamodb().Table(names.tables["deletion_requests"]).get_item(
        Key={"deletion_request_id": deletion_request_id}, ConsistentRead=True
    ).get("Item")
    return item["status"] if item else "MISSING"


def arm_fault(names: Names, step: str, point: str, deletion_request_id: str, kind: str, times: int = 1) -> str:
    faults = import_function_module("deletion_faults")
    return faults.arm(_dynamodb().Table(names.tables["faults"]), step, point, deletion_request_id, kind, times)


def disarm_fault(names: Names, fault_key: str) -> None:
    """Take an armed fault away: the cause of the failures is fixed."""
    _dynamodb().Table(names.tables["faults"]).delete_item(Key={"fault_key": fault_key})


# The in-process twin of the workflow's ASL, for tests and notebook cells that run the
# step functions without Step Functions: the same states, the same Retry and Catch.
STEP_RETRIES = 2  # the ASL's Retry MaxAttempts


def run_workflow_in_process(deletion_request_id: str, owner: str, redrive: bool = False) -> str:
    """Run one attempt; returns how it ended: the claim outcome, or the final status."""
    claimed = import_function_module("claim_deletion").handler(
        {"deletion_request_id": deletion_request_id, "owner": owner, "redrive": redrive}, None
    )
    if claimed["outcome"] != "claimed":
        return claimed["outcome"]
    return run_steps_in_process({key: value for key, value in claimed.items() if key != "outcome"})


def run_steps_in_process(claim: dict) -> str:
    """The steps after a won claim, each retried as the ASL retries it, then the end."""
    errors = import_function_module("deletion_errors")
    steps = import_function_module("deletion_steps")
    complete = import_function_module("complete_deletion")
    point = steps.next_after("claim")
    while point != "complete":
        handler = import_function_module(point).handler
        for attempt in range(STEP_RETRIES + 1):
            try:
                claim = handler(claim, None)
                break
            except errors.ClaimLost:
                return "superseded"
            except errors.DeletionError as exc:
                if attempt == STEP_RETRIES:
                    error = {"Error": type(exc).__name__, "Cause": str(exc)}
                    return complete.handler({**claim, "error": error}, None)["status"]
        if not claim.get(steps.MORE_TO_DO):  # the ASL's MoreRecords / MoreFiles choices
            point = steps.next_after(point)
    try:
        return complete.handler(claim, None)["status"]
    except errors.ClaimLost:
        return "superseded"


# -- the deployed workflow ------------------------------------------------------------


def invoke(lab: dict, function_key: str, event: dict) -> dict:
    """Invoke a deployed deletion function and return its answer; a function error raises."""
    answer = clients.client("lambda").invoke(FunctionName=lab["functions"][function_key], Payload=json.dumps(event).encode())
    body = json.loads(answer["Payload"].read() or b"null")
    if answer.get("FunctionError"):
        raise RuntimeError(f"{function_key} failed: {body}")
    return body


def start(names: Names, deletion_request_id: str, execution_name: str | None = None) -> str:
    """Start the workflow for a request, named like the schedule names it unless told."""
    return clients.client("stepfunctions").start_execution(
        stateMachineArn=names.state_machine_arn,
        name=execution_name or deletion_request_id,
        input=json.dumps({"deletion_request_id": deletion_request_id}),
    )["executionArn"]


def wait_for(execution_arn: str, timeout: float = 120) -> dict:
    """The execution once it stopped running."""
    return clients.wait_for_execution(execution_arn, timeout, poll_seconds=0.2)


# -- notebook 03: claims and leases, told on a timeline ------------------------------------


@dataclass
class Timeline:
    """What happened to one request, per worker, on one clock: for the pictures."""

    events: list = field(default_factory=list)  # (time, worker, label, outcome): True accepted, False refused, None a note
    leases: list = field(default_factory=list)  # (worker, start, end, token)

    def event(self, t: float, worker: str, label: str, accepted: bool | None) -> None:
        self.events.append((t, worker, label, accepted))

    def lease(self, worker: str, start: float, end: float, token: int) -> None:
        self.leases.append((worker, start, end, token))

    def draw(self, title: str = "", ax=None):
        import matplotlib.pyplot as plt

        workers = list(dict.fromkeys([w for _, w, _, _ in self.events] + [w for w, *_ in self.leases]))
        if ax is None:
            _, ax = plt.subplots(figsize=(11, 0.6 + 1.5 * len(workers)))
        row = {w: i for i, w in enumerate(workers)}
        for worker, start, end, token in self.leases:
            ax.broken_barh([(start, end - start)], (row[worker] - 0.12, 0.24), color="#e4e4e4", edgecolor="#aaaaaa")
            ax.annotate(f"lease (token {token})", (end, row[worker]), fontsize="x-small", color="#777777", ha="right", va="center")
        look = {True: ("#55a868", "o"), False: ("#c44e52", "X"), None: ("#777777", "d")}
        for worker in workers:
            mine = sorted((e for e in self.events if e[1] == worker), key=lambda e: e[0])
            for n, (t, _, label, accepted) in enumerate(mine):
                colour, marker = look[accepted]
                y = row[worker]
                ax.plot(t, y, marker=marker, color=colour, markersize=10, zorder=3)
                # Labels alternate above and below the lane so neighbours do not collide.
                offset = -0.42 if n % 2 == 0 else 0.42
                ax.annotate(label, (t, y + offset), fontsize="small", ha="center", va="center", color=colour)
        ax.set_yticks(range(len(workers)), workers)
        ax.set_ylim(len(workers) - 0.3, -0.7)
        ax.set_xlabel("seconds   (green: write accepted by DynamoDB, red: refused, grey: what the worker does)")
        ax.set_title(title)
        return ax


def deletion_requests_table(lab: dict):
    return _dynamodb().Table(lab["tables"]["deletion_requests"])


def new_request_item(lab: dict, user_id: str | None = None) -> str:
    """A SCHEDULED request straight in the table (no schedule): for the in-notebook stories."""
    state = import_function_module("deletion_state")
    request_id = f"del-story-{uuid.uuid4().hex[:10]}"
    state.create(deletion_requests_table(lab), request_id, user_id or f"user-{uuid.uuid4().hex[:6]}", 0)
    return request_id


def zombie_story(lab: dict, lease_seconds: int = 30) -> tuple[Timeline, dict]:
    """Worker A claims, stalls past its lease; B claims; A wakes and writes: refused.

    Runs on the deployed table with an explicit clock, so the story takes milliseconds
    and ends the same way every time.
    """
    state = import_function_module("deletion_state")
    errors = import_function_module("deletion_errors")
    table, request_id, timeline = deletion_requests_table(lab), new_request_item(lab), Timeline()
    t0 = 1_800_000_000
    a = state.claim(table, request_id, "worker A", lease_seconds, now=t0).claim
    timeline.event(0, "worker A", f"claim: token {a.fencing_token}", True)
    state.record_step(table, a, "delete_records", lease_seconds, now=t0 + 10)
    timeline.event(10, "worker A", "delete_records done", True)
    timeline.lease("worker A", 0, 10 + lease_seconds, a.fencing_token)
    timeline.event(20, "worker A", "stalls: GC pause, slow network", None)
    early = state.claim(table, request_id, "worker B", lease_seconds, now=t0 + 30)
    timeline.event(30, "worker B", f"claim: {early.outcome.value}", early.claim is not None)
    b = state.claim(table, request_id, "worker B", lease_seconds, now=t0 + 10 + lease_seconds + 2).claim
    b_at = 10 + lease_seconds + 2
    timeline.event(b_at, "worker B", f"claim: token {b.fencing_token}", True)
    timeline.lease("worker B", b_at, b_at + lease_seconds, b.fencing_token)
    outcome = {"early_claim": early.outcome.value, "zombie_write": "accepted", "tokens": (a.fencing_token, b.fencing_token)}
    try:
        state.record_step(table, a, "delete_files", lease_seconds, now=t0 + b_at + 3)
    except errors.ClaimLost:
        outcome["zombie_write"] = "refused"
    timeline.event(b_at + 3, "worker A", f"wakes, writes with token {a.fencing_token}", outcome["zombie_write"] == "accepted")
    for offset, step in enumerate(("delete_files", "delete_identity", "send_goodbye"), start=8):
        state.record_step(table, b, step, lease_seconds, now=t0 + b_at + offset)
    timeline.event(b_at + 8, "worker B", "files, identity, email", True)
    state.complete(table, b, now=t0 + b_at + 16)
    timeline.event(b_at + 16, "worker B", "COMPLETED", True)
    outcome["final"] = state.read(table, request_id)
    return timeline, outcome


def _claim_rounds(lab: dict, workers: int, rounds: int, claim_one, join_seconds: float) -> dict[str, dict]:
    """``workers`` threads released together by a barrier call ``claim_one(request_id, index)``
    on a fresh request, ``rounds`` times: the outcomes counted, and the winners per round."""
    tally: Counter = Counter()
    winners_per_round: Counter = Counter()
    for _ in range(rounds):
        request_id = new_request_item(lab)
        start_line = threading.Barrier(workers)
        outcomes = [None] * workers

        def claim(index):
            start_line.wait()
            outcomes[index] = claim_one(request_id, index)

        threads = [threading.Thread(target=claim, args=(i,)) for i in range(workers)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=join_seconds)
        tally.update(outcomes)
        winners_per_round[outcomes.count("claimed")] += 1
    return {"outcomes": dict(tally), "winners_per_round": dict(winners_per_round)}


def claim_race(lab: dict, workers: int = 8, rounds: int = 20) -> dict[str, int]:
    """``workers`` threads claim the same request at once, ``rounds`` times: outcomes counted."""
    state = import_function_module("deletion_state")
    tables = [deletion_requests_table(lab) for _ in range(workers)]
    return _claim_rounds(
        lab, workers, rounds,
        lambda request_id, index: state.claim(tables[index], request_id, f"worker-{index}", 60).outcome.value,
        join_seconds=30,
    )


def claim_race_deployed(lab: dict, workers: int = 4, rounds: int = 10) -> dict[str, dict]:
    """``workers`` invocations of the deployed ``claim_deletion`` function for the same
    request at once, ``rounds`` times: the claim runs where it runs in production, in
    the function, not in this process. Outcomes counted."""
    return _claim_rounds(
        lab, workers, rounds,
        lambda request_id, index: invoke(lab, "claim_deletion", {"deletion_request_id": request_id, "owner": f"worker-{index}"})["outcome"],
        join_seconds=60,
    )


def cancel_race(lab: dict, rounds: int = 20) -> dict[str, int]:
    """A cancel and a claim on the same SCHEDULED request at the same moment, ``rounds`` times."""
    state = import_function_module("deletion_state")
    tables = [deletion_requests_table(lab), deletion_requests_table(lab)]
    tally: Counter = Counter()
    for _ in range(rounds):
        request_id = new_request_item(lab)
        start_line = threading.Barrier(2)
        won = {}

        def cancel():
            start_line.wait()
            won["cancel"] = state.cancel(tables[0], request_id)[0]

        def claim():
            start_line.wait()
            won["claim"] = state.claim(tables[1], request_id, "the schedule", 60).claim is not None

        threads = [threading.Thread(target=cancel), threading.Thread(target=claim)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=30)
        winners = [name for name, ok in won.items() if ok]
        tally[winners[0] if len(winners) == 1 else f"{len(winners)} winners"] += 1
    return dict(tally)


def request_for(lab: dict, user_id: str, delay_seconds: int = 0) -> dict:
    """Ask the deployed request_deletion function to delete ``user_id`` later."""
    return invoke(lab, "request_deletion", {"user_id": user_id, "delay_seconds": delay_seconds})


def the_schedule(lab: dict, deletion_request_id: str) -> dict:
    request_deletion = import_function_module("request_deletion")
    return clients.client("scheduler").get_schedule(Name=request_deletion.schedule_name(deletion_request_id), GroupName=lab["schedule_group"])


def executions_of(lab: dict, deletion_request_id: str) -> list[dict]:
    """Executions whose name starts with the request id, oldest first."""
    sfn = clients.client("stepfunctions")
    found, token = [], None
    while True:
        page = sfn.list_executions(stateMachineArn=lab["state_machines"]["account_deletion"], **({"nextToken": token} if token else {}))
        found += [e for e in page["executions"] if e["name"].startswith(deletion_request_id)]
        token = page.get("nextToken")
        if not token:
            return sorted(found, key=lambda e: e["startDate"])


def last_state(execution_arn: str) -> str:
    """The last state an execution entered: how it ended (AlreadyDone, Complete, ...)."""
    events = clients.client("stepfunctions").get_execution_history(executionArn=execution_arn, maxResults=1000)["events"]
    entered = [e for e in sorted(events, key=lambda e: e["id"]) if e.get("stateEnteredEventDetails")]
    return entered[-1]["stateEnteredEventDetails"]["name"] if entered else "?"


# -- notebook 04: partial failures and recovery ------------------------------------------------


def task_attempts(execution_arn: str) -> list[tuple[str, str]]:
    """(state, what happened) for every Lambda attempt of an execution, in order."""
    events = sorted(
        clients.client("stepfunctions").get_execution_history(executionArn=execution_arn, maxResults=1000)["events"],
        key=lambda e: e["id"],
    )
    current, attempts = None, []
    for event in events:
        if event.get("stateEnteredEventDetails"):
            current = event["stateEnteredEventDetails"]["name"]
        elif event["type"] == "LambdaFunctionSucceeded":
            attempts.append((current, "succeeded"))
        elif event["type"] in ("LambdaFunctionFailed", "LambdaFunctionTimedOut"):
            details = event.get("lambdaFunctionFailedEventDetails") or event.get("lambdaFunctionTimedOutEventDetails") or {}
            attempts.append((current, f"failed: {details.get('error', event['type'])}"))
    return attempts


def draw_attempts(attempts: list[tuple[str, str]], title: str = "", ax=None):
    """One row per workflow state; a green dot per successful attempt, a red cross per failure."""
    import matplotlib.pyplot as plt

    states = list(dict.fromkeys(state for state, _ in attempts))
    if ax is None:
        _, ax = plt.subplots(figsize=(10, 0.6 + 0.5 * len(states)))
    for n, (state_name, what) in enumerate(attempts):
        ok = what == "succeeded"
        ax.plot(n, states.index(state_name), marker="o" if ok else "X", color="#55a868" if ok else "#c44e52", markersize=10)
        if not ok:
            ax.annotate(what.replace("failed: ", ""), (n, states.index(state_name) + 0.3), fontsize="x-small", color="#c44e52")
    ax.set_yticks(range(len(states)), states)
    ax.set_ylim(len(states) - 0.3, -0.7)
    ax.set_xlabel("Lambda attempts, in order")
    ax.set_title(title)
    return ax


def steps_done(lab: dict, deletion_request_id: str) -> list[str]:
    state = import_function_module("deletion_state")
    return sorted(state.read(deletion_requests_table(lab), deletion_request_id).steps_done)


def queue_depth(url: str) -> int:
    attributes = clients.client("sqs").get_queue_attributes(
        QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
    )["Attributes"]
    return int(attributes["ApproximateNumberOfMessages"]) + int(attributes["ApproximateNumberOfMessagesNotVisible"])


def run_until_failed(lab: dict, names: Names, deletion_request_id: str, max_attempts: int = 3) -> list[str]:
    """Start attempts until the request is FAILED, as the sweeper would restart it after
    each failure (without waiting for its retry delay); the end states of the attempts."""
    state = import_function_module("deletion_state")
    table, name, ends = deletion_requests_table(lab), deletion_request_id, []
    for _ in range(max_attempts):
        execution = wait_for(start(names, deletion_request_id, name))
        ends.append(f"{execution['status']} -> request {state.read(table, deletion_request_id).status.value}")
        stored = state.read(table, deletion_request_id)
        if stored.status is not state.Status.RETRYABLE:
            break
        name = f"{deletion_request_id}-retry-{stored.fencing_token}"
    return ends


def sweep_now(lab: dict) -> dict:
    """Invoke the deployed sweeper function once, as its schedule would; its answer."""
    answer = clients.client("lambda").invoke(FunctionName=lab["functions"]["sweeper"], Payload=b"{}")
    body = json.loads(answer["Payload"].read() or b"null")
    if answer.get("FunctionError"):
        raise RuntimeError(f"sweeper failed: {body}")
    return body


def stuck_metric(lab: dict, minutes: int = 15, wait_seconds: float = 0) -> dict:
    """What the stuck-requests alarm watches, and the values the sweeper published to it
    (waiting up to ``wait_seconds`` for the first one: CloudWatch may be slow to show a
    new metric)."""
    cloudwatch = clients.client("cloudwatch")
    alarm = cloudwatch.describe_alarms(AlarmNames=[lab["alarms"]["stuck_processing"]])["MetricAlarms"][0]
    deadline = time.monotonic() + wait_seconds
    while True:
        now = datetime.datetime.now(datetime.timezone.utc)
        points = cloudwatch.get_metric_statistics(
            Namespace=alarm["Namespace"],
            MetricName=alarm["MetricName"],
            Dimensions=alarm["Dimensions"],
            StartTime=now - datetime.timedelta(minutes=minutes),
            EndTime=now + datetime.timedelta(minutes=1),
            Period=60,
            Statistics=["Maximum"],
        )["Datapoints"]
        if points or time.monotonic() > deadline:
            break
        time.sleep(10)
    return {
        "metric": f"{alarm['Namespace']}/{alarm['MetricName']}",
        "dimensions": alarm["Dimensions"],
        "maximum per minute": [p["Maximum"] for p in sorted(points, key=lambda p: p["Timestamp"])],
    }


def clean_up(lab: dict, request_ids) -> list[str]:
    """Leave nothing scheduled behind: cancel each request still SCHEDULED (which deletes
    its schedule) and delete any schedule left for the others. The schedules of these
    requests that still exist afterwards (none, unless something refused)."""
    request_deletion = import_function_module("request_deletion")
    scheduler = clients.client("scheduler")
    left = []
    for request_id in request_ids:
        if request_status(Names.from_outputs(lab), request_id) == "SCHEDULED":
            invoke(lab, "cancel_deletion", {"deletion_request_id": request_id})
        name = request_deletion.schedule_name(request_id)
        try:
            scheduler.delete_schedule(Name=name, GroupName=lab["schedule_group"])
        except scheduler.exceptions.ResourceNotFoundException:
            pass
        if scheduler.list_schedules(GroupName=lab["schedule_group"], NamePrefix=name)["Schedules"]:
            left.append(name)
    return left
